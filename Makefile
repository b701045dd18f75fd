# The README's two commands: `make demo` (the embedded default end to end) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export HF_HUB_OFFLINE := 1

.PHONY: setup demo test lint typecheck bench-ingest clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[embed,eval,dev]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

setup: $(STAMP)

demo: setup
	$(BIN)/memtoc --home .memtoc-demo demo

lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: setup
	$(BIN)/mypy

test: setup lint typecheck
	$(BIN)/pytest -q

bench-ingest: setup
	$(BIN)/memtoc bench ingest --events 100000 --events 1000000

clean:
	rm -rf $(VENV) .memtoc-demo .pytest_cache .mypy_cache .ruff_cache
