# One target per habitual task. Each uses the project's own virtual environment (.venv).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: venv demo chaos local-up console screenshots test test-fast lint format typecheck validate bench clean

$(BIN)/converge: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[dev]'
	@touch $@

venv: $(BIN)/converge

demo: venv          ## the main job: the whole pipeline on the in-process local cloud
	$(BIN)/converge demo

chaos: venv         ## the long fault-injection run
	$(BIN)/converge demo --chaos --jobs 10000

local-up: venv      ## a local cloud on 127.0.0.1:4566 for the AWS CLI
	$(BIN)/converge local up --port 4566 --outputs-file .converge/outputs.json

console: venv       ## the operations console against `make local-up`'s cloud
	$(BIN)/converge console --endpoint-url http://127.0.0.1:4566 --open

screenshots: venv   ## the console's pages as PNGs in docs/console (headless chromium)
	CONSOLE_SCREENSHOTS=docs/console $(BIN)/python -m pytest -q tests/console/test_browser.py

test: venv          ## the whole suite
	$(BIN)/python -m pytest -q

test-fast: venv     ## unit tests only
	$(BIN)/python -m pytest -q tests/unit

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: venv
	$(BIN)/mypy

validate: venv      ## cfn-lint on the SAM template (sam validate --lint runs the same linter)
	$(BIN)/cfn-lint template.yaml

bench: venv
	$(BIN)/converge bench --jobs 1000

clean:
	rm -rf $(VENV) .venv-test .pytest_cache .mypy_cache .ruff_cache .converge
