# errscope — the README's two commands are `make run` and `make test`.
# Both set up everything on a fresh machine: the virtualenv, the package, and (for tests)
# the local services the integration tests talk to.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
SRC := errscope/__init__.py collector queries dashboards tests bench examples

.PHONY: setup run test lint fmt bench services clean

# The scrub engine is Rust (engine/): the install builds it, so the stamp depends on its
# sources, and a missing or old cargo stops here with what to install.
ENGINE_SRC := engine/Cargo.toml engine/Cargo.lock $(wildcard engine/src/*.rs)
CARGO_MIN := 1.74

$(STAMP): pyproject.toml $(ENGINE_SRC)
	@bash scripts/check-cargo.sh $(CARGO_MIN)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -c 'import sys; assert sys.version_info >= (3, 11), "errscope needs Python >= 3.11"'
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

setup: $(STAMP)

## run: the main job on the embedded default store (see README)
run: setup
	$(VENV)/bin/errscope run --data-dir data

## services: start what the integration tests need (PostgreSQL, Chromium); idempotent
services:
	@bash scripts/ensure-services.sh

lint: setup
	$(VENV)/bin/ruff check $(SRC)
	$(VENV)/bin/ruff format --check $(SRC)
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache  # the layering contracts in pyproject.toml

fmt: setup
	$(VENV)/bin/ruff format $(SRC)
	$(VENV)/bin/ruff check --fix $(SRC)

# Four workers on two cores: most tests wait on real processes (sidecars, PostgreSQL,
# Chromium); --dist loadfile keeps a module's shared fixtures (one sidecar per transport for
# the conformance corpus) in one worker.
TEST_WORKERS ?= 4
test: setup services lint
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

## bench: every benchmark; each prints ratios against an anchor measured in the same run
bench: setup services
	$(PY) bench/store_append.py
	$(PY) bench/scrub.py
	$(PY) bench/tracebacks.py
	$(PY) bench/overhead.py
	$(PY) bench/ingest.py
	$(PY) bench/detection.py
	$(PY) bench/detection_budget.py
	$(PY) bench/queries.py
	$(PY) bench/dashboard.py
	$(PY) bench/lake.py

clean:
	rm -rf $(VENV) build dist *.egg-info bench/out
