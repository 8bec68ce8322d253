# One target per habitual task, in the environments the README's quick start creates:
# .venv (converge with its cli and local extras: demo, chaos, local-up) and .venv-test (the dev tools).
PY ?= python3
VENV ?= .venv
DEV_VENV ?= .venv-test
BIN := $(VENV)/bin
DEV_BIN := $(DEV_VENV)/bin
APP_REQUIREMENTS := shared/catalogue/requirements.txt

.PHONY: venv dev-venv demo chaos local-up test test-fast lint format typecheck validate bench clean

$(BIN)/converge: pyproject.toml $(APP_REQUIREMENTS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[cli,local]' -r $(APP_REQUIREMENTS)
	@touch $@

$(DEV_BIN)/pytest: pyproject.toml $(APP_REQUIREMENTS)
	$(PY) -m venv $(DEV_VENV)
	$(DEV_BIN)/pip install -q -e '.[dev]' -r $(APP_REQUIREMENTS)
	@touch $@

venv: $(BIN)/converge

dev-venv: $(DEV_BIN)/pytest

demo: venv          ## the main job: the whole pipeline on the in-process local cloud
	$(BIN)/converge demo

chaos: venv         ## the long fault-injection run
	$(BIN)/converge demo --chaos --jobs 10000

local-up: venv      ## a local cloud on 127.0.0.1:4566 for the AWS CLI
	$(BIN)/converge local up --port 4566 --outputs-file .converge/outputs.json

test: dev-venv      ## what CI runs: lint, format check, types, the whole suite
	$(DEV_BIN)/ruff check .
	$(DEV_BIN)/ruff format --check .
	$(DEV_BIN)/mypy
	$(DEV_BIN)/python -m pytest -q

test-fast: dev-venv ## unit tests only
	$(DEV_BIN)/python -m pytest -q tests/unit

lint: dev-venv
	$(DEV_BIN)/ruff check .
	$(DEV_BIN)/ruff format --check .

format: dev-venv
	$(DEV_BIN)/ruff format .
	$(DEV_BIN)/ruff check --fix .

typecheck: dev-venv
	$(DEV_BIN)/mypy

validate: dev-venv  ## cfn-lint on the SAM template (sam validate --lint runs the same linter)
	$(DEV_BIN)/cfn-lint template.yaml

bench: dev-venv
	$(DEV_BIN)/converge bench --jobs 1000

clean:
	rm -rf $(VENV) $(DEV_VENV) .pytest_cache .mypy_cache .ruff_cache .converge
