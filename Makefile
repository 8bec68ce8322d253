# One target per habitual task. Each uses the project's own virtual environment (.venv).
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: venv demo chaos local-up console screenshots test test-fast lint format typecheck validate bench mutate clean

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

# Mutation testing of the rule modules (tests/mutation.toml), in its own environment: mutmut needs a
# newer click than aws-sam-cli allows. `make mutate MODULES="converge.outcomes converge.policies"`
# re-runs just those in the existing workspace, `make mutate SURVIVORS=1` only what the last run left
# alive (after writing tests), `make mutate RECHECK="tests/unit/test_x.py"` just those test files against
# the last run's survivors (no re-measuring of the whole suite); either way docs/mutation.md is rewritten.
MUTATE_VENV ?= .venv-mutate
MUTATE_JOBS ?= 2
$(MUTATE_VENV)/bin/mutmut: pyproject.toml
	$(PY) -m venv $(MUTATE_VENV)
	$(MUTATE_VENV)/bin/pip install -q -e '.[mutate]'
	@touch $@

mutate: $(MUTATE_VENV)/bin/mutmut   ## over an hour on two cores; writes docs/mutation.md
ifdef RECHECK
	$(MUTATE_VENV)/bin/python -m converge_mutation recheck --max-children $(MUTATE_JOBS) $(RECHECK)
else
	$(MUTATE_VENV)/bin/python -m converge_mutation run --max-children $(MUTATE_JOBS) \
		$(if $(MODULES),--only $(MODULES)) $(if $(SURVIVORS),--survivors)
endif
	$(MUTATE_VENV)/bin/python -m converge_mutation report

clean:
	rm -rf $(VENV) .venv-test $(MUTATE_VENV) .mutate .pytest_cache .mypy_cache .ruff_cache .converge
