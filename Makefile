# One target per habitual task, in the environments the README's quick start creates:
# .venv (converge with its cli and local extras: demo, chaos, local-up), .venv-test (the dev tools) and
# .venv-scan (checkov, apart: it pins boto3 and packaging below what the dev tools need).
PY ?= python3
VENV ?= .venv
DEV_VENV ?= .venv-test
SCAN_VENV ?= .venv-scan
BIN := $(VENV)/bin
DEV_BIN := $(DEV_VENV)/bin
SCAN_BIN := $(SCAN_VENV)/bin
TEMPLATES := template.yaml shared/converge/application/template.yaml infra/converge_cli/scaffold/template.yaml
EXAMPLE_KEY := arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab
APP_REQUIREMENTS := shared/catalogue/requirements.txt

help:               ## this list: every target with what it does
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/^([a-z-]+):[^#]*## /\1\t/' | awk -F'\t' '{printf "  make %-12s %s\n", $$1, $$2}'

.PHONY: help venv dev-venv scan-venv constraints demo chaos local-up console screenshots docs test test-fast lint format typecheck validate scan dist bench bench-docs explore explore-power faults mutate clean

$(BIN)/converge: pyproject.toml $(APP_REQUIREMENTS)
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[cli,local]' -r $(APP_REQUIREMENTS)
	@touch $@

# The dev tools and checkov are installed with uv under infra/constraints/ (as the README's test command does).
# The tests' environment is compiled to bytecode as it is installed (pip does that by default, uv does not): the
# suite starts many interpreters (CLI commands, local clouds, cold starts), and where PYTHONDONTWRITEBYTECODE is
# set none of them would keep what it compiled, each compiling boto3, botocore and moto again.
$(DEV_BIN)/pytest: pyproject.toml $(APP_REQUIREMENTS) infra/constraints/dev.txt
	$(PY) -m venv $(DEV_VENV)
	$(DEV_BIN)/pip install -q -c infra/constraints/dev.txt uv
	$(DEV_BIN)/uv pip install -q --compile-bytecode -p $(DEV_VENV) -c infra/constraints/dev.txt -e '.[dev]' -r $(APP_REQUIREMENTS)
	@touch $@

$(SCAN_BIN)/checkov: pyproject.toml infra/constraints/scan.txt $(DEV_BIN)/pytest
	$(DEV_BIN)/uv venv -q --allow-existing -p $(PY) $(SCAN_VENV)
	$(DEV_BIN)/uv pip install -q -p $(SCAN_VENV) -c infra/constraints/scan.txt -e '.[scan]'
	@touch $@

constraints:   ## ask pip again what .[dev] and .[scan] resolve to, and rewrite infra/constraints/*.txt
	$(PY) infra/constraints/pin.py

venv: $(BIN)/converge   ## .venv: converge with its cli and local extras and the reference application's libraries

dev-venv: $(DEV_BIN)/pytest   ## .venv-test: the test tools under infra/constraints/dev.txt

scan-venv: $(SCAN_BIN)/checkov   ## .venv-scan: checkov under infra/constraints/scan.txt

demo: venv          ## the main job: the whole pipeline on the in-process local cloud
	$(BIN)/converge demo

chaos: venv         ## the long fault-injection run
	$(BIN)/converge demo --chaos --jobs 10000

local-up: venv      ## a local cloud on 127.0.0.1:4566 for the AWS CLI
	$(BIN)/converge local up --port 4566 --outputs-file .converge/outputs.json

console: venv       ## the operations console against `make local-up`'s cloud
	$(BIN)/converge console --endpoint-url http://127.0.0.1:4566 --open

screenshots: dev-venv ## the console's pages as PNGs in docs/console (headless chromium; pytest and selenium)
	CONSOLE_SCREENSHOTS=docs/console $(DEV_BIN)/python -m pytest -q tests/console/test_browser.py

DOCS_ADDR ?= 127.0.0.1:8000
docs: dev-venv       ## the documentation site (MkDocs Material, mkdocs.yml) on http://127.0.0.1:8000 (DOCS_ADDR=... for another), rebuilt on every save
	$(DEV_BIN)/mkdocs serve -a $(DOCS_ADDR)

test:               ## what CI runs (infra/check): lint, format check, types, import contracts, the wheel and sdist checked, the docs site built, the whole suite
	infra/check

test-fast: dev-venv ## the unit tests but those marked slow, in parallel (under a minute)
	$(DEV_BIN)/python -m pytest -q -n auto -m "not slow" tests/unit

lint: dev-venv       ## ruff, its format check, and the import contracts (the layers, one storage boundary, no cycles)
	infra/check lint contracts

format: dev-venv     ## ruff format and ruff check --fix, in place
	$(DEV_BIN)/ruff format .
	$(DEV_BIN)/ruff check --fix .

typecheck: dev-venv  ## mypy
	infra/check types

validate: dev-venv  ## cfn-lint on the SAM template, without and with a customer-managed key (sam validate --lint runs the same linter)
	$(DEV_BIN)/cfn-lint template.yaml
	$(DEV_BIN)/cfn-lint template.yaml --parameters KmsKeyArn=$(EXAMPLE_KEY)

scan: scan-venv     ## checkov on the template, converge's application and the scaffold's (options in .checkov.yaml; findings are fixed or skipped with a reason)
	$(SCAN_BIN)/checkov --quiet $(addprefix -f ,$(TEMPLATES))

dist: dev-venv      ## build the wheel and sdist into a temporary directory and check them with twine
	dist=$$(mktemp -d) && $(DEV_BIN)/python -m build -q --installer uv -o "$$dist" && $(DEV_BIN)/twine check --strict "$$dist"/* && echo "built in $$dist"

bench: dev-venv      ## the benchmark: converge against its baselines, each target PASS or FAIL
	$(DEV_BIN)/converge bench

bench-docs: dev-venv ## the benchmark, then docs/benchmarks.md written from its report (run it on a quiet machine)
	$(DEV_BIN)/converge bench --write-docs

# The explorer at length (tests/explore): random histories from a seed it prints (SEED=... replays a run),
# `make explore EXAMPLES=2000` histories (default 500) or `make explore EXPLORE_SECONDS=3600` for a time budget.
explore: dev-venv   ## operations under every combination of faults, toggles, cancels and operators
	@seed=$${SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; echo "explore: seed $$seed"; \
	EXPLORE=1 EXPLORE_SEED=$$seed EXPLORE_EXAMPLES=$(EXAMPLES) EXPLORE_SECONDS=$(EXPLORE_SECONDS) \
		EXPLORE_IGNORE=$(IGNORE) EXPLORE_SHRINK=$(SHRINK) EXPLORE_STEPS=$(STEPS) PYTHONHASHSEED=0 \
		$(DEV_BIN)/python -m pytest -q -s \
		-p no:cacheprovider -p no:logging tests/explore/test_explore.py::test_explore_at_length --hypothesis-seed=$$seed

# The explorer's power (docs/explorer-power.md): each kept break (tests/explore/breaks/*.patch) brought back in a
# throwaway copy of the tree and explored from a fresh seed; `make explore-power BUDGET=120 JOBS=1 ONLY="a b"`;
# the report is written as each break ends, and `make explore-power RESUME=1` goes on with a stopped run (same tree).
explore-power: dev-venv   ## how fast the explorer finds every kept break; writes docs/explorer-power.md
	nice -n 10 $(DEV_BIN)/python -m tests.explore.power --budget $(or $(BUDGET),600) -j $(or $(JOBS),2) \
		$(if $(SEED),--seed $(SEED)) $(if $(ONLY),--only $(ONLY)) $(if $(RESUME),--resume)

# The fault schedules at length (tests/faults/test_schedules.py): random schedules from a seed it prints
# (SEED=... replays a run), `make faults EXAMPLES=500` per test (default 200); the test command runs 95 fixed ones.
faults: dev-venv   ## random fault schedules per policy at length, every invariant checked after each
	@seed=$${SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; echo "faults: seed $$seed"; \
	SCHEDULE_EXAMPLES=$(or $(EXAMPLES),200) $(DEV_BIN)/python -m pytest -q -p no:cacheprovider \
		tests/faults/test_schedules.py --hypothesis-seed=$$seed

# Mutation testing of the rule modules (tests/mutation.toml), in its own environment: mutmut needs a
# newer click than aws-sam-cli allows. `make mutate MODULES="converge.model.outcomes converge.flow.policies"`
# re-runs every mutant of those in the existing workspace, `make mutate RESUME=1` goes on with a stopped run
# or after a fix, or on a fresh clone from the results kept in docs/mutation-results.jsonl (only the mutants
# with no result yet: not reached, or of a function changed since), `make mutate SURVIVORS=1` only what the last run left alive or
# unchecked (after writing tests), `make mutate RECHECK="tests/unit/test_x.py"` just those test files against
# the last run's survivors (no re-measuring of the whole suite); either way docs/mutation.md is rewritten.
MUTATE_VENV ?= .venv-mutate
MUTATE_JOBS ?= 2
$(MUTATE_VENV)/bin/mutmut: pyproject.toml $(APP_REQUIREMENTS)
	$(PY) -m venv $(MUTATE_VENV)
	$(MUTATE_VENV)/bin/pip install -q -e '.[mutate]' -r $(APP_REQUIREMENTS)
	@touch $@

mutate: $(MUTATE_VENV)/bin/mutmut   ## some hours on two cores (MODULES=... for a part); writes docs/mutation.md
ifdef RECHECK
	PYTHONPATH=infra $(MUTATE_VENV)/bin/python -m converge_mutation recheck --max-children $(MUTATE_JOBS) $(RECHECK)
else
	PYTHONPATH=infra $(MUTATE_VENV)/bin/python -m converge_mutation run --max-children $(MUTATE_JOBS) \
		$(if $(MODULES),--only $(MODULES)) $(if $(SURVIVORS),--survivors) $(if $(RESUME),--resume)
endif
	PYTHONPATH=infra $(MUTATE_VENV)/bin/python -m converge_mutation report

clean:              ## remove the virtual environments, caches and build output
	rm -rf $(VENV) $(DEV_VENV) $(SCAN_VENV) $(MUTATE_VENV) .mutate .pytest_cache .mypy_cache .ruff_cache .converge
