"""Labelled pairs of coding-agent memory facts, for calibrating an embedder's DistanceProfile.

Each group says what the pipeline should do when the second fact arrives and the first is stored:

- ``NEAR_DUPLICATE``: a rephrasing; dedups under the general threshold.
- ``EVOLVED_STRUCTURAL``: the same structural fact with more detail; dedups under the structural one.
- ``CONTRADICTION``: same subject, changed value; within contradiction distance, so the LLM is asked.
- ``RELATED``: same area, different fact; must never dedup.
- ``UNRELATED``: must never dedup, and should mostly fall outside contradiction distance.
"""

from __future__ import annotations

Pair = tuple[str, str]

NEAR_DUPLICATE: list[Pair] = [
    ("Auth uses JWT stored in httpOnly cookies", "Authentication keeps JWTs in httpOnly cookies, not localStorage"),
    ("User prefers bun over npm for all installs", "The user wants bun used instead of npm for installing packages"),
    ("Always run the linter before committing", "Run the linter before every commit"),
    ("The user prefers tabs over spaces for indentation", "User likes indentation with tabs rather than spaces"),
    ("Database migrations are managed with Alembic", "Alembic handles the database migrations"),
    ("Never commit secrets to the repository", "Secrets must never be committed to the repo"),
    ("The CI pipeline runs on GitHub Actions", "CI runs in GitHub Actions workflows"),
    ("Use snake_case for Python function names", "Python functions are named in snake_case"),
    (
        "The user wants concise answers without long explanations",
        "User prefers short, concise responses over lengthy explanations",
    ),
    (
        "Integration tests require a running Postgres container",
        "A Postgres container must be running for the integration tests",
    ),
    ("The project uses Poetry for dependency management", "Dependencies are managed with Poetry"),
    (
        "Prefer composition over inheritance in this codebase",
        "This codebase favors composition rather than inheritance",
    ),
    ("Environment variables are loaded from a .env file", "The app reads its environment variables from .env"),
    ("The user does not want emojis in commit messages", "No emojis in commit messages, per the user"),
    ("Docker builds use a multi-stage Dockerfile", "The Dockerfile is multi-stage"),
]

EVOLVED_STRUCTURAL: list[Pair] = [
    ("The API is built with FastAPI", "The backend API uses FastAPI with uvicorn"),
    ("The frontend is a React app", "The frontend is a React 18 app built with Vite and TypeScript"),
    ("Data is stored in PostgreSQL", "Data is stored in PostgreSQL 16 with the pgvector extension for embeddings"),
    ("Source code lives under src/", "Source code lives under src/, with tests mirrored under tests/"),
    ("The service communicates through Kafka", "Services exchange events over Kafka topics partitioned by user id"),
    ("The app is deployed with Docker", "The app ships as a Docker image deployed via docker compose on a single VM"),
    ("State management uses Redux", "State management uses Redux Toolkit with RTK Query for data fetching"),
    ("The monorepo is managed with pnpm workspaces", "The monorepo uses pnpm workspaces and Turborepo for builds"),
    ("Background jobs run on Celery", "Background jobs run on Celery workers with Redis as the broker"),
    ("The CLI entry point is cli.py", "The CLI entry point is memstream/cli.py, built with argparse subcommands"),
]

CONTRADICTION: list[Pair] = [
    ("Tests run with pytest", "Tests now run with nox sessions"),
    ("Deploy target is AWS Lambda", "We moved deployment to Cloud Run"),
    ("The project uses npm as its package manager", "The project switched from npm to pnpm"),
    ("The database is MySQL", "We migrated the database from MySQL to PostgreSQL"),
    ("Python version is 3.10", "The project now requires Python 3.12"),
    ("Logging goes to stdout in plain text", "Logs are now emitted as structured JSON"),
    ("The user prefers dark mode in the editor", "User switched to the light theme in the editor"),
    ("The default branch is master", "The default branch was renamed to main"),
    ("Formatting is done with black", "We replaced black with ruff format"),
    ("API responses are cached in Memcached", "Caching moved from Memcached to Redis"),
]

RELATED: list[Pair] = [
    ("Auth uses JWT stored in httpOnly cookies", "Passwords are hashed with argon2"),
    ("Tests run with pytest", "Test fixtures live in tests/conftest.py"),
    ("The API is built with FastAPI", "API request bodies are validated with Pydantic models"),
    ("Data is stored in PostgreSQL", "Database backups run nightly at 2am UTC"),
    ("The frontend is a React app", "Frontend components are styled with Tailwind CSS"),
    ("The CI pipeline runs on GitHub Actions", "Releases are tagged with semantic version numbers"),
    ("User prefers bun over npm for all installs", "User prefers Vitest over Jest for unit tests"),
    ("Deploy target is AWS Lambda", "Lambda functions have a 15 second timeout configured"),
    ("Background jobs run on Celery", "Emails are sent through SendGrid"),
    ("Use snake_case for Python function names", "Python classes use PascalCase names"),
    # Added after a first calibration: parallel facts that differ in one word sit as close as paraphrases.
    ("Unit tests run with pytest", "Integration tests run with pytest and testcontainers"),
    ("The API listens on port 8000", "The admin dashboard listens on port 3000"),
    ("Use snake_case for Python variables", "Use camelCase for TypeScript variables"),
    ("The user prefers bun for installs", "The user prefers pnpm for the docs site"),
    ("Auth uses JWT access tokens", "Refresh tokens are stored in Redis"),
    ("The frontend uses React Router for navigation", "The frontend uses React Query for server state"),
    ("Run the linter before committing", "Run the type checker before pushing"),
    ("Postgres runs on port 5432", "Redis runs on port 6379"),
    ("The staging environment is deployed on Fly.io", "The production environment is deployed on AWS ECS"),
    ("User prefers pytest fixtures over setUp methods", "User prefers parametrized tests over loops in tests"),
    ("The API returns errors as RFC 7807 problem details", "The API paginates lists with cursor tokens"),
    ("Migrations live in db/migrations", "Seeds live in db/seeds"),
]

UNRELATED: list[Pair] = [
    ("Auth uses JWT stored in httpOnly cookies", "The user prefers tabs over spaces for indentation"),
    ("Tests run with pytest", "The frontend is a React app"),
    ("Data is stored in PostgreSQL", "The user wants concise answers without long explanations"),
    ("Deploy target is AWS Lambda", "Python functions are named in snake_case"),
    ("Background jobs run on Celery", "The default branch is main"),
    ("Logs are emitted as structured JSON", "User prefers bun over npm for all installs"),
    ("Never commit secrets to the repository", "State management uses Redux"),
    ("The CLI entry point is cli.py", "Passwords are hashed with argon2"),
    ("Images are resized with Pillow before upload", "The monorepo is managed with pnpm workspaces"),
    ("Session summary: fixed the flaky websocket test", "The API rate limit is 100 requests per minute"),
]

GROUPS: dict[str, list[Pair]] = {
    "near_duplicate": NEAR_DUPLICATE,
    "evolved_structural": EVOLVED_STRUCTURAL,
    "contradiction": CONTRADICTION,
    "related": RELATED,
    "unrelated": UNRELATED,
}
