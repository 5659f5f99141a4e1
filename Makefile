# The two commands of the README. Each sets up what it needs on a fresh machine:
# a virtualenv in .venv with memstream and its test dependencies (from PyPI).
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed-stamp

.PHONY: up check test bench chaos clean

# The console's browser tests drive Debian's chromium (Playwright cannot download its own here): installed
# when missing, as CI runs it (root, Debian).
$(STAMP): pyproject.toml
	@if [ ! -x /usr/bin/chromium ]; then apt-get update -q && apt-get install -y -q chromium; fi
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## Run memstream on the embedded default: Tansu broker, Qdrant edge store, bundled embedder.
up: $(STAMP)
	$(VENV)/bin/memstream up

## Lint, format, type and docs checks; fixes are made by hand, or for formatting by `.venv/bin/ruff format .`.
## mypy keeps its cache in .mypy_cache (gitignored), so a second run checks only what changed.
check: $(STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mkdocs build --strict

## Run the checks, then the whole test suite against the same real components, a test file per core
## (the end-to-end tests wait on brokers and processes; tests/conftest.py starts the longest files first).
test: check
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider -n auto --dist loadfile

## Measure: throughput, latency, store scaling, and mem0 side by side (installs the bench extra).
bench: $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	$(VENV)/bin/python -m bench.harness

## Fault injection, heavy: 10,000 records, 10 kill -9 of the worker; prints lost/duplicated/mispaired.
chaos: $(STAMP)
	$(VENV)/bin/python -m bench.chaos --sessions 500 --exchanges 10 --kills 10 --poison 10000 --outage 300

clean:
	rm -rf $(VENV) .memstream *.egg-info
