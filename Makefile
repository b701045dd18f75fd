# The README's two commands: `make demo` (the embedded default end to end) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export HF_HUB_OFFLINE := 1

.PHONY: setup demo test lint typecheck pg bench-ingest clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[embed,eval,ann,dev,postgres]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

# The embedded default loads a static embedding model; offline, use the local copy beside the repo.
MEMTOC_EMBED_MODEL ?= $(wildcard $(CURDIR)/../shared/models/minilm-static-256)
export MEMTOC_EMBED_MODEL

demo: setup
	$(BIN)/memtoc --home .memtoc-demo demo

lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: setup
	$(BIN)/mypy

# PostgreSQL + pgvector on 127.0.0.1:54329 for the team-mode tests (scripts/postgres-ci.sh): reused
# when running, provisioned with apt as root, skipped with a message otherwise (the PostgreSQL
# tests then skip locally and fail under CI=true).
MEMTOC_TEST_PG_URL ?= postgresql://postgres@127.0.0.1:54329/postgres

pg:
	scripts/postgres-ci.sh

test: setup lint typecheck pg
	MEMTOC_TEST_PG_URL=$(MEMTOC_TEST_PG_URL) $(BIN)/pytest -q

bench-ingest: setup
	$(BIN)/memtoc bench ingest --events 100000 --events 1000000

clean:
	rm -rf $(VENV) .memtoc-demo .pytest_cache .mypy_cache .ruff_cache
