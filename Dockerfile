# memstream worker image: `memstream up` against a real Kafka and Qdrant (see docker-compose.yml).
#
# Two stages: the first builds a virtualenv under /opt/memstream from PyPI wheels, the second copies
# only that virtualenv onto a clean python:3.11-slim. Every dependency ships a manylinux wheel, so
# no compiler is needed in either stage.

ARG PYTHON_IMAGE=python:3.11-slim

# --- build: a self-contained virtualenv ------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/memstream
ENV PATH=/opt/memstream/bin:$PATH
WORKDIR /src
# Dependencies first, from pyproject.toml alone, so that editing the code does not reinstall them.
COPY pyproject.toml README.md ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install --upgrade pip \
    && pip install -r /tmp/requirements.txt
# Then the project itself. agents/, topics/ and schemas/ install as memstream.agents, .topics and
# .schemas (pyproject's package-dir), so the image's site-packages gains only `memstream`.
COPY memstream ./memstream
COPY agents ./agents
COPY topics ./topics
COPY schemas ./schemas
RUN pip install . \
    && memstream --help > /dev/null

# --- runtime ---------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="memstream" \
      org.opencontainers.image.description="Kafka/Faust memory pipeline for coding agents" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PATH=/opt/memstream/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    MEMSTREAM_DATA_DIR=/var/lib/memstream \
    MEMSTREAM_HTTP_HOST=0.0.0.0 \
    MEMSTREAM_HTTP_PORT=8765

RUN groupadd --system --gid 10001 memstream \
    && useradd --system --uid 10001 --gid memstream --home-dir /home/memstream --create-home \
        --shell /usr/sbin/nologin memstream \
    && mkdir -p /var/lib/memstream \
    && chown memstream:memstream /var/lib/memstream

COPY --from=build /opt/memstream /opt/memstream

USER 10001:10001
WORKDIR /home/memstream
# MEMSTREAM_DATA_DIR holds Faust table state and the runtime file. With MEMSTREAM_KAFKA_BOOTSTRAP and
# MEMSTREAM_QDRANT_URL set nothing durable lives there (tables are rebuilt from their changelog
# topics), so it is deliberately not a VOLUME. A runtime file left behind by a killed container is
# recognised as stale (it names this very pid, or a process that is not memstream) and ignored.

EXPOSE 8765

# python:3.11-slim has no curl or wget: probe the search API's /health with the interpreter itself.
# The port follows MEMSTREAM_HTTP_PORT.
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=6 \
    CMD python -c "import os, sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:%s/health' % os.environ.get('MEMSTREAM_HTTP_PORT', '8765'), timeout=4).status == 200 else 1)"

# `memstream up` handles SIGTERM itself: it stops the Faust worker cleanly (commits offsets).
STOPSIGNAL SIGTERM
CMD ["memstream", "up"]
