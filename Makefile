# The README's two commands: `make demo` (the embedded default end to end) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export HF_HUB_OFFLINE := 1

.PHONY: setup demo test lint typecheck pg browser bench-ingest soak clean

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

# Headless Chromium for the web UI test (tests/test_web_browser.py drives it with Playwright):
# Debian's chromium, installed with apt as root when missing; Playwright's own browser download is
# never used (no CDN). Without root or apt it says so: the browser tests then skip locally and
# fail under CI=true.
CHROMIUM ?= /usr/bin/chromium

browser:
	@if [ -x "$(CHROMIUM)" ]; then \
	  echo "browser: using $(CHROMIUM)"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q chromium; \
	elif [ "$${CI:-}" = true ]; then \
	  echo "browser: ERROR: $(CHROMIUM) missing and cannot install it (not root or no apt-get)" >&2; \
	  exit 1; \
	else \
	  echo "browser: SKIPPING: $(CHROMIUM) missing, not root or no apt-get (browser tests will be skipped)" >&2; \
	fi

test: setup lint typecheck pg browser
	MEMTOC_TEST_PG_URL=$(MEMTOC_TEST_PG_URL) $(BIN)/pytest -q

# Reliability soak (docs/reliability.md): the crash loop with 200 landed SIGKILLs, then the fuzz
# tests at >= 100k cases (2,000 per store-backed test, 30,000 per pure parser) and the bounds at the
# issue's sizes (100 MB transcript, 50 MB tool result, 100k-event session).
soak: setup
	$(BIN)/memtoc bench soak --kills 200
	MEMTOC_FUZZ_EXAMPLES=2000 $(BIN)/pytest -q -p no:cacheprovider --hypothesis-show-statistics tests/test_fuzz.py
	MEMTOC_BOUNDS_FULL=1 $(BIN)/pytest -q -s -p no:cacheprovider tests/test_bounds.py

bench-ingest: setup
	$(BIN)/memtoc bench ingest --events 100000 --events 1000000

clean:
	rm -rf $(VENV) .memtoc-demo .pytest_cache .mypy_cache .ruff_cache
