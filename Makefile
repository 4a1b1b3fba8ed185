# The whole set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= $(or $(GPUFIT_HOST),127.0.0.1)
PORT ?= $(or $(GPUFIT_PORT),8000)
# pytest-xdist workers: on 2 cores the suite takes ~6-7 min with 2, ~9-11 min in one process.
TEST_WORKERS ?= 2

.PHONY: run test lint typecheck pytest bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/gpufit db upgrade
	$(BIN)/gpufit load-sample --if-empty
	GPUFIT_HOST=$(HOST) GPUFIT_PORT=$(PORT) $(BIN)/gpufit serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python tests/browser_check.py
	$(BIN)/pytest -q -n $(TEST_WORKERS)

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python -m bench.run

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
