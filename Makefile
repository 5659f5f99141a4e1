# The two commands of the README. Each sets up what it needs on a fresh machine, in a virtualenv in .venv
# (from PyPI): `make up` installs memstream and what running it needs, nothing more; `make test` adds the
# test tools and the browser the console's tests drive.
VENV ?= .venv
PYTHON ?= python3
RUN_STAMP := $(VENV)/.installed-stamp
TEST_STAMP := $(VENV)/.test-installed-stamp
#: `make up PORT=9000 DATA=~/mem`: where memstream serves (API, MCP, console) and keeps its data. Unset, the
#: settings decide (MEMSTREAM_HTTP_PORT, 8765; MEMSTREAM_DATA_DIR, .memstream).
PORT ?=
DATA ?=
#: `make test TEST_WORKERS=4`: how many pytest workers share the test files (auto: one per core). Most of an
#: end-to-end test is waiting (group joins, brokers, polls), so more workers than cores may finish sooner.
TEST_WORKERS ?= auto

.PHONY: up check test bench chaos clean

$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e .
	touch $(RUN_STAMP)

# The console's browser tests drive Debian's chromium (Playwright cannot download its own here): installed
# when missing, as CI runs it (root, Debian). Only the test set-up does this; running memstream never does.
$(TEST_STAMP): $(RUN_STAMP) pyproject.toml
	@if [ ! -x /usr/bin/chromium ]; then apt-get update -q && apt-get install -y -q chromium; fi
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(TEST_STAMP)

## Run memstream on the embedded default: Tansu broker, Qdrant edge store, bundled embedder.
up: $(RUN_STAMP)
	$(if $(PORT),MEMSTREAM_HTTP_PORT=$(PORT)) $(if $(DATA),MEMSTREAM_DATA_DIR=$(DATA)) $(VENV)/bin/memstream up

## Lint, format, type and docs checks; fixes are made by hand, or for formatting by `.venv/bin/ruff format .`.
## mypy keeps its cache in .mypy_cache (gitignored), so a second run checks only what changed.
check: $(TEST_STAMP)
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mkdocs build --strict

## Run the checks, then the whole test suite against the same real components, a test file per worker, one
## worker per core unless TEST_WORKERS says (the end-to-end tests wait on brokers and processes; tests/conftest.py
## hands the longest files out first).
test: check
	$(VENV)/bin/python -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile

## Measure: throughput, latency, store scaling, and mem0 side by side (installs the bench extra).
bench: $(TEST_STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	$(VENV)/bin/python -m bench.harness

## Fault injection, heavy: 10,000 records, 10 kill -9 of the worker; prints lost/duplicated/mispaired.
chaos: $(TEST_STAMP)
	$(VENV)/bin/python -m bench.faults.chaos --sessions 500 --exchanges 10 --kills 10 --poison 10000 --outage 300

clean:
	rm -rf $(VENV) .memstream *.egg-info
