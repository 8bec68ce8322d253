"""Every example in README.md and on the documentation site's pages (docs/) is run or checked by a test, so
neither can drift from the code.

How it works (docs/readme-examples.md says the same, for whoever adds an example):

* `blocks.py` reads every fenced block of README.md and of every page under docs/ and names it by (its page,
  the heading above it, its first line). `COVERAGE` below must hold exactly those names: a block nobody
  registered, or an entry whose block was edited away or moved to another page, fails
  `test_every_example_block_is_covered` with the name to add or fix.
* An entry is `Run(...)`: the block runs *as written* in the shared session below (one local cloud
  from the docs' own `converge local up`, a bash shell with the session's environment, the working
  directory a fresh one, so relative paths such as `.converge/outputs.json` are the docs'); `Mirrored(test)`:
  a test here checks what the block says (an HTTP response's shape, a placeholder command with real values
  substituted, a copy of a block that runs elsewhere); or `NotRun(reason)`: it cannot run in a test (an AWS
  account, minutes of load), and the reason names what covers it instead.
* The only change made to a block before running it is the port: 4566 becomes a free port, so that
  runs on one machine (tests in parallel among them) never collide: `converge local up` gets port 0
  (the OS picks one as it binds) and the other blocks the port its outputs file names. Anything else a
  block needs is exported by an earlier block, as a reader following the pages in one terminal would
  have it.

To add an example: write it on its page, add its name to COVERAGE (the failure message prints it),
and if it is `Run`, add it to the session in reading order (`ran`), with a check of what it did.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from converge.flow.registry import NamedFunction, load_named
from converge.store.codecs import record_from_item
from tests.cli import test_queue_settings as queue_settings
from tests.conftest import WITH_STACKS, as_a_shell_starts_it, stopped_with_ctrl_c

from .blocks import Block, block, blocks, check_step

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Run:
    how: str  # "bash" or "python": in the session, in README order


@dataclass(frozen=True)
class Mirrored:
    test: str  # a test in this module that checks what the block says


@dataclass(frozen=True)
class NotRun:
    reason: str


LOCAL_UP = (
    "docs/local-cloud.md",
    "The local cloud",
    "converge local up --port 4566 --outputs-file .converge/outputs.json",
)
TERMINAL = (
    "docs/local-cloud.md",
    "The local cloud",
    "export AWS_ENDPOINT_URL=http://127.0.0.1:4566 AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local",
)
LIBRARY = ("docs/enqueueing.md", "From Python", "import converge")
README_EXAMPLE = ("README.md", "In a few lines", "import converge")
CLI_ENQUEUE = (
    "docs/enqueueing.md",
    "From the command line",
    """converge enqueue email.password-reset.v1 --id reset-7f3a --payload '{"user_id": "u-1002"}'""",
)
API_EXAMPLES = (
    "docs/http-api.md",
    "Examples against `converge local up`",
    'converge local up --outputs-file .converge/outputs.json      # prints "enqueue API http://127.0.0.1:<port>"',
)
CURL = (
    "docs/http-api.md",
    "Examples against `converge local up`",
    'curl -sS -X POST "$API/jobs/email.password-reset.v1" \\',
)
SIGV4 = ("docs/http-api.md", "Examples against `converge local up`", "import json")
POST_RESPONSE = ("docs/http-api.md", "`POST /jobs/{job_type}`: enqueue a job", "HTTP/1.1 202 Accepted")
GET_RESPONSE = (
    "docs/http-api.md",
    "`GET /operations/{operation_id}`: an operation's state",
    '{"operation_id": "api-5d0c4d3d0f6a…", "job_type": "email.password-reset.v1", "state": "SUCCEEDED",',
)
OPERATING = (
    "docs/operating.md",
    "Operating",
    "converge ops show OPERATION_ID                # the receipt: state, history, current and earlier errors, "
    "conflicts",  # its lines are run by test_the_operating_commands_run_with_real_ids
)
IDENTIFIER_TYPES = ("docs/messages.md", "Identifier types", "from typing import Annotated")
ALLOWING = ("docs/messages.md", "Allowing a field", "from converge import Allow, Identifier")
CONSOLE = (
    "docs/console.md",
    "Console",
    "converge console --endpoint-url http://127.0.0.1:4566   # prints: console http://127.0.0.1:<port>/?token=… "
    "(Ctrl-C to stop)",
)
CHAOS = (
    "docs/fault-injection.md",
    "Fault injection and load",
    "converge demo --chaos --jobs 10000 --seed 7          # the long run, with a report",
)

KEY_POLICY = ("docs/deploying.md", "A customer-managed key", "[")
QUEUE_SETTINGS = ("docs/deploying.md", "Deploying", "Converge:")
QUICK_START = (
    "README.md",
    "Quick start",
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[cli,local]' -r shared/catalogue/requirements.txt"
    " && .venv/bin/converge demo",
)
WALKTHROUGH = (  # docs/add-a-job.md: the reference application's money job, step by step
    ("docs/add-a-job.md", "2. The message model", "from converge import Code, Identifier, JobMessage"),
    (
        "docs/add-a-job.md",
        "3. The ports and their adapters",
        "class PartnerDirectory(Protocol):  # catalogue/partners.py",
    ),
    ("docs/add-a-job.md", "4. The runner", "class PartnerBenefitRunner:"),
    ("docs/add-a-job.md", "5. The binding", "def build_runner() -> PartnerBenefitRunner:"),
    ("docs/add-a-job.md", "5. The binding", "PARTNER_BENEFITS = JobBinding("),
    (
        "docs/add-a-job.md",
        "7. The tests",
        "def test_the_runner_credits_under_the_operation_id_and_confirms_by_it(app: App) -> None:",
    ),
)
FIRST_JOB_COMMANDS = ("docs/first-job.md", "Your first job", "converge init shop-jobs && cd shop-jobs")
FIRST_JOB = tuple(  # docs/first-job.md: a new project's own files, as `converge init` writes them
    b.key for b in blocks(ROOT / "docs" / "first-job.md") if b.key != FIRST_JOB_COMMANDS
)
USE_INSTALL = (
    "docs/use-converge.md",
    "Install and start a project",
    "python3 -m venv .venv && .venv/bin/pip install 'converge-jobs[cli,test]'",
)
USE_WHEEL = (
    "docs/use-converge.md",
    "Install and start a project",
    "uv build --wheel -o dist /path/to/converge     # a wheel from a checkout (or: python -m build --wheel)",
)
USE_TEMPLATE = (
    "docs/use-converge.md",
    "How the command line finds your project",
    "converge --template ../other/template.yaml --catalogue other_jobs jobs list",
)
STEPS = (  # docs/steps-and-continuations.md: run as written by tests/unit/test_steps_docs.py
    (
        "docs/steps-and-continuations.md",
        "A job of three steps",
        "from converge import Confirmation, Identifier, JobBinding, JobContext, JobMessage, Policy, Queue",
    ),
    ("docs/steps-and-continuations.md", "What a retry does", 'operation_id = "publish-cv-42"'),
    (
        "docs/steps-and-continuations.md",
        "When the provider cannot tell: UNKNOWN, naming the step",
        'converge ops resolve publish-cv-42 --as succeeded --reason "the charge is in the ledger"',
    ),
    ("docs/steps-and-continuations.md", "Waits between steps", "from converge import JobContext"),
    (
        "docs/steps-and-continuations.md",
        "Continuations: what comes next, exactly once",
        "from converge import Identifier, JobBinding, JobMessage, Policy, Queue, Then",
    ),
)
SIGNALS = (  # docs/signals.md: run as written by tests/unit/test_signals_docs.py
    (
        "docs/signals.md",
        "Wait for a signal",
        "from converge import Identifier, JobBinding, JobContext, JobMessage, Policy, Queue",
    ),
    ("docs/signals.md", "Send a signal", 'operation_id = "credit-4711"'),
    (
        "docs/signals.md",
        "Send a signal",
        'converge signal credit-4711 approval --payload \'{"decision": "approved", "operator_id": "op-7"}\' '
        "--signal-id ap-1",
    ),
    ("docs/signals.md", "Send a signal", "POST /operations/credit-4711/signals/approval"),
    ("docs/signals.md", "In the producer's own transaction", 'operation_id = "credit-4712"'),
)
BATCHES = (  # docs/batches.md: run as written by tests/unit/test_batches_docs.py
    (
        "docs/batches.md",
        "Declare the child job and the callback",
        "from converge import BatchSummary, Identifier, JobBinding, JobContext, JobMessage, Policy, Queue",
    ),
    ("docs/batches.md", "Admit the batch", "import converge"),
    ("docs/batches.md", "Follow it, and the callback", 'batch = converge.get_batch("statements-2026-11")'),
    ("docs/batches.md", "Follow it, and the callback", "converge batches show statements-2026-11 --failed"),
    ("docs/batches.md", "Follow it, and the callback", 'batch = converge.get_batch("statements-2026-11")'),
    (
        "docs/batches.md",
        "Cancel a batch",
        'converge batches cancel statements-2026-11 --reason "sent by hand this month"',
    ),
    ("docs/batches.md", "A batch that cannot finish by itself", "converge batches list --attention"),
)
FLOW_CONTROL = (  # docs/flow-control.md: run as written by tests/unit/test_flow_control_docs.py
    (
        "docs/flow-control.md",
        "Declare the limiters and the jobs that use them",
        "from converge import Identifier, JobBinding, JobContext, JobMessage, Limiter, Policy, Queue, RateLimited, Uses",  # noqa: E501
    ),
    (
        "docs/flow-control.md",
        "Inside a runner: a call to a limited partner, and its 429",
        "def run(self, message: SyncListing, listing_id: str, ctx: JobContext) -> None:",
    ),
    ("docs/flow-control.md", "What an operator sees", "converge status"),
    ("docs/flow-control.md", "The hottest key, and a hotter one", "from converge import Limiter"),
    (
        "docs/flow-control.md",
        "Per-key concurrency: at most N running at once",
        "from converge import Concurrency, Identifier, JobBinding, JobContext, JobMessage, Policy, Queue",
    ),
    (
        "docs/flow-control.md",
        "Modes: queue, skip, replace",
        "from converge import Concurrency, Identifier, JobBinding, JobContext, JobMessage, Policy, Queue",
    ),
    (
        "docs/flow-control.md",
        "Debounce: one run after a burst of requests",
        "from converge import Debounce, Identifier, JobBinding, JobContext, JobMessage, Policy, Queue",
    ),
)
TESTING = (  # docs/testing.md: its Python blocks run as a team's project's tests by tests/testing/test_testing_docs.py
    ("docs/testing.md", "The pytest fixtures", "from converge import OperationState"),
    ("docs/testing.md", "A cloud of your own: local_cloud()", "from converge import OperationState"),
    ("docs/testing.md", "The effect counter", "from converge import BatchCallback, BatchChild"),
    ("docs/testing.md", "Faults", "from converge import OperationState"),
    ("docs/testing.md", "A missing grant", "def test_the_order_e_mail_is_granted(converge_cloud):"),
    (
        "docs/testing.md",
        "The explorer",
        "def test_the_orders_keep_their_promise_under_the_explorer(converge_explore):",
    ),
    ("docs/testing.md", "The explorer", "from converge_testing import explore, local_cloud"),
)
EXPLORE_COMMAND = (  # docs/testing.md: the command and its report, run and compared by test_explore_breaks.py
    ("docs/testing.md", "From the command line", "converge explore --seed 1 --examples 120"),
    (
        "docs/testing.md",
        "From the command line",
        "✗ EffectTwice: r1h89-b1::0:c1 SUCCEEDED (orders.receipt.v1, keyed_effect): 2 ReceiptsTable, its clean run "
        "makes 1",
    ),
)
TESTING_INSTALL = ("docs/testing.md", "Testing your jobs: converge_testing", "pip install 'converge-jobs[test]'")
ARCHITECTURE = (
    "docs/architecture.md",
    "converge's architecture: layers, one storage boundary, one way to wire",
    "flowchart TB",
)

COVERAGE: dict[tuple[str, str], Run | Mirrored | NotRun] = {
    QUICK_START: Mirrored("test_the_quick_start_test_command_is_what_ci_runs"),
    ("docs/getting-started.md", *QUICK_START[1:]): Mirrored("test_the_quick_start_test_command_is_what_ci_runs"),
    README_EXAMPLE: Mirrored("test_the_readme_example_is_the_one_the_session_runs"),
    (
        "docs/how-it-works.md",
        "How it works",
        "producer ──PutItem / TransactWriteItems──▶ jobs table: requests (stream NEW_AND_OLD_IMAGES = the outbox)",
    ): NotRun("a diagram"),
    LIBRARY: Run("python"),
    CLI_ENQUEUE: Run("bash"),
    POST_RESPONSE: Mirrored("test_the_api_answers_as_the_readme_shows"),
    GET_RESPONSE: Mirrored("test_the_api_answers_as_the_readme_shows"),
    API_EXAMPLES: Run("bash"),
    CURL: Run("bash"),
    SIGV4: Run("python"),
    LOCAL_UP: Run("bash"),
    TERMINAL: Run("bash"),
    ("docs/deploying.md", "Deploying", "pip install aws-sam-cli"): NotRun(
        "needs an AWS account; tests/template runs `sam validate --lint` and cfn-lint on the same template"
    ),
    KEY_POLICY: Mirrored("test_the_key_policy_example_admits_the_services_that_use_the_key_themselves"),
    QUEUE_SETTINGS: Mirrored("test_the_queue_settings_example_is_what_the_queue_settings_tests_deploy"),
    OPERATING: Mirrored("test_the_operating_commands_run_with_real_ids"),
    CONSOLE: Mirrored("test_the_console_starts_as_written_and_serves_its_pages"),
    IDENTIFIER_TYPES: Mirrored("test_the_message_examples_define_the_models_they_describe"),
    ALLOWING: Mirrored("test_the_message_examples_define_the_models_they_describe"),
    (
        "docs/http-api.md",
        "`POST /operations/{operation_id}/signals/{name}`: signal a waiting step",
        "HTTP/1.1 202 Accepted",
    ): NotRun("an answer; tests/api/test_signals_api.py checks that a signal's answer has these fields"),
    (
        "docs/http-api.md",
        "`POST /batches/{name}`: admit a batch",
        "POST /batches/statements-2026-11",
    ): NotRun("a request and its answer; tests/api/test_batches_api.py posts this batch and checks this answer"),
    CHAOS: (NotRun("minutes of load; tests/faults/test_load.py runs the same chaos run at 400 jobs")),
    (
        "docs/explorer-power.md",
        "How it runs",
        "make explore-power                          # every kept break, 600 s each, two at once",
    ): (NotRun("minutes of exploration per break; tests/explore/test_kept_breaks.py checks that every patch applies")),
    (
        "docs/explorer-power.md",
        "When you fix a break",
        "Break: A credit paused after its holder crashed past the ledger is cancelled: CANCELLED with the credit made",
    ): (NotRun("a patch's header; tests/explore/test_kept_breaks.py reads every kept patch's header")),
    (
        "docs/fault-injection.md",
        "The explorer",
        'make explore                          # 500 random histories; prints its seed ("explore: seed 1234")',
    ): (
        NotRun("minutes of random histories; tests/explore/test_explore.py runs the bounded, derandomized exploration")
    ),
    (
        "docs/benchmarks.md",
        "Benchmarks",
        "make bench                      # = converge bench: 400 jobs per design in 5 rounds, cold starts included",
    ): NotRun(
        "minutes; tests/bench/test_bench_command.py runs `converge bench --jobs 20 --rounds 1 --json` (batch: 260)"
    ),
    (
        "docs/deploying.md",
        "SnapStart",
        'sam deploy --parameter-overrides Stage=prod                  # SnapStart "auto": on in production',
    ): NotRun(
        "needs an AWS account; tests/template lints the template every way and tests/localcloud deploys it every way"
    ),
    **{key: Mirrored("test_the_walkthrough_shows_the_catalogues_own_job") for key in WALKTHROUGH},
    FIRST_JOB_COMMANDS: NotRun(
        "installs converge and makes a project; tests/adoption/test_adoption.py runs `converge init`, `jobs list`,"
        " `demo` and the new project's own tests in a fresh environment outside the repository"
    ),
    **{key: Mirrored("test_the_first_job_page_shows_a_new_projects_own_files") for key in FIRST_JOB},
    USE_INSTALL: NotRun(
        "installs from the package index; tests/adoption/test_adoption.py installs the wheel built from this"
        " checkout in a fresh environment outside the repository, runs `converge init`, `jobs list`, `demo` and"
        " the new project's own tests"
    ),
    USE_WHEEL: NotRun(
        "a checkout's path; tests/adoption/test_adoption.py builds the wheel with uv and installs it with"
        " --find-links in a fresh environment, tests/adoption/test_extras.py each extra from the wheel"
    ),
    USE_TEMPLATE: NotRun(
        "names another project; tests/cli/test_no_catalogue.py runs the commands with --template and --catalogue"
        " from outside a project"
    ),
    **{key: Mirrored("test_the_steps_page_runs_its_examples_in_their_own_tests") for key in STEPS},
    **{key: Mirrored("test_the_batches_page_runs_its_examples_in_their_own_tests") for key in BATCHES},
    **{key: Mirrored("test_the_flow_control_page_runs_its_examples_in_their_own_tests") for key in FLOW_CONTROL},
    **{key: Mirrored("test_the_signals_page_runs_its_examples_in_their_own_tests") for key in SIGNALS},
    **{key: Mirrored("test_the_testing_page_runs_its_examples_in_their_own_tests") for key in TESTING},
    **{key: Mirrored("test_the_testing_page_runs_its_examples_in_their_own_tests") for key in EXPLORE_COMMAND},
    TESTING_INSTALL: NotRun("the package index; tests/adoption/test_extras.py installs each extra, [test] too, alone"),
    ARCHITECTURE: NotRun("a diagram; `lint-imports` (in the test command) keeps the layers it draws"),
}


def test_every_example_block_is_covered():
    found = {b.key for b in blocks()}
    missing = sorted(found - set(COVERAGE))
    stale = sorted(set(COVERAGE) - found)
    assert not missing, f"example blocks no test covers; add each to COVERAGE in {__file__}: {missing}"
    assert not stale, f"COVERAGE names blocks that are gone, were edited or moved (fix the key): {stale}"
    mirrors = {entry.test for entry in COVERAGE.values() if isinstance(entry, Mirrored)}
    assert all(callable(globals().get(name)) for name in mirrors), mirrors


def test_the_quick_start_test_command_is_what_ci_runs():
    # Given the README's quick start, and the same block on the site's getting-started page
    quick_start = block(*QUICK_START).text
    assert block("docs/getting-started.md", *QUICK_START[1:]).text == quick_start
    run, test = quick_start.splitlines()
    # Then the test command is `make test` (which runs the script `infra/check`), and `.ci/run`'s last line, exactly
    assert test == "make test"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test
    assert "converge demo" in run  # run by tests/integration/test_demo.py and `make demo`
    # And it installs its environments first, builds the documentation site --strict with nothing left in the
    # tree, and runs the suite last, on one worker per core (capped in tests/conftest.py), each test file whole on
    # one worker: a module's local cloud is deployed once, as in a serial run
    steps = check_steps()
    assert steps[0] == "environments" and steps[-1] == "suite"
    assert 'mkdocs build --strict -d "$(mktemp -d)"' in " ".join(check_step("site"))
    suite = ".venv-test/bin/python -m pytest -q -n auto --dist loadfile"
    assert [line.strip() for line in check_step("suite")] == [suite]


def check_steps() -> list[str]:
    """The steps `infra/check` runs, in order, as it lists them."""
    listed = subprocess.run([ROOT / "infra" / "check", "--list"], capture_output=True, text=True, check=True)
    return listed.stdout.split()


def test_the_test_command_says_which_step_failed_and_refuses_an_unknown_one(tmp_path: Path):
    # Given a copy of `infra/check` whose lint step's first command fails (its second would pass)
    (tmp_path / "infra").mkdir()
    script = (ROOT / "infra" / "check").read_text().replace(".venv-test/bin/ruff check .", "false", 1)
    assert "false" in script
    copy = tmp_path / "infra" / "check"
    copy.write_text(script)
    copy.chmod(0o755)
    # When it runs that step
    failed = subprocess.run([copy, "lint"], capture_output=True, text=True, cwd=tmp_path)
    # Then the run stops there, non-zero, naming the step
    assert failed.returncode == 1
    assert "step lint failed (exit 1)" in failed.stderr
    assert "ok in" not in failed.stdout
    # When asked for a step it does not have / Then it refuses before running anything, listing its steps
    unknown = subprocess.run([copy, "types", "lnit"], capture_output=True, text=True, cwd=tmp_path)
    assert unknown.returncode == 2
    assert "no step named 'lnit'" in unknown.stderr and "environments lint" in unknown.stderr
    assert unknown.stdout == ""


def test_make_test_and_its_parts_call_the_test_command():
    if not shutil.which("make"):
        pytest.skip("make is not installed")

    # When make prints what `make test`, `make lint` and `make typecheck` run once the environments exist
    def dry(target: str) -> str:
        done = subprocess.run(
            ["make", "-n", "-o", ".venv-test/bin/pytest", "-o", ".venv-scan/bin/checkov", target],
            cwd=ROOT,
            env=outside_make(),
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    # Then each is `infra/check`, whole or with the steps it names: the steps have one source
    assert dry("test") == "infra/check"
    assert dry("lint") == "infra/check lint contracts"
    assert dry("typecheck") == "infra/check types"
    assert {"lint", "contracts", "types"} <= set(check_steps())


def outside_make() -> dict[str, str]:
    """The environment without what a calling make passes down (`make test` runs this suite): a nested make would
    otherwise print "Entering directory" lines around what it is asked."""
    return {name: value for name, value in os.environ.items() if name not in {"MAKEFLAGS", "MAKELEVEL", "MFLAGS"}}


def test_make_help_lists_every_target_with_a_description():
    if not shutil.which("make"):
        pytest.skip("make is not installed")
    # Given the Makefile's targets (the rules a user types: not file targets nor variables)
    makefile = (ROOT / "Makefile").read_text()
    targets = {line.split(":", 1)[0] for line in makefile.splitlines() if re.match(r"^[a-z][a-z-]*:", line)}
    # When `make help` runs, and when `make` runs with no target
    shown = subprocess.run(["make", "help"], cwd=ROOT, env=outside_make(), capture_output=True, text=True, check=True)
    default = subprocess.run(["make"], cwd=ROOT, env=outside_make(), capture_output=True, text=True, check=True)
    # Then every target is listed once, with what it does, and help is what `make` alone prints
    listed = [line.split()[1] for line in shown.stdout.splitlines()]
    assert sorted(listed) == sorted(targets)
    assert all(len(line.split(None, 2)) == 3 for line in shown.stdout.splitlines())
    assert default.stdout == shown.stdout


def test_the_readme_example_is_the_one_the_session_runs():
    # The README's short example is the enqueueing page's, which the session runs as written
    assert block(*README_EXAMPLE).text == block(*LIBRARY).text


def test_the_steps_page_runs_its_examples_in_their_own_tests():
    # Given the page's blocks, and the tests that run them as written (over moto, with providers that count)
    from tests.unit import test_steps_docs

    page = ROOT / STEPS[0][0]
    # Then those tests read this page, and each of its blocks is one they run, in the order they expect
    assert page == test_steps_docs.PAGE
    assert [found.key for found in blocks(page)] == list(STEPS)
    test_steps_docs.test_the_page_has_the_examples_this_test_runs()


def test_the_signals_page_runs_its_examples_in_their_own_tests():
    # Given the page's blocks, and the tests that run them as written (over moto, with providers that count)
    from tests.unit import test_signals_docs

    page = ROOT / SIGNALS[0][0]
    # Then those tests read this page, and each of its blocks is one they run, in the order they expect
    assert page == test_signals_docs.PAGE
    assert [found.key for found in blocks(page)] == list(SIGNALS)
    test_signals_docs.test_the_page_has_the_examples_this_test_runs()


def test_the_batches_page_runs_its_examples_in_their_own_tests():
    # Given the page's blocks, and the tests that run them as written (over moto, with a mail provider that counts)
    from tests.unit import test_batches_docs

    page = ROOT / BATCHES[0][0]
    # Then those tests read this page, and each of its blocks is one they run, in the order they expect
    assert page == test_batches_docs.PAGE
    assert [found.key for found in blocks(page)] == list(BATCHES)
    test_batches_docs.test_the_page_has_the_examples_this_test_runs()


def test_the_flow_control_page_runs_its_examples_in_their_own_tests():
    # Given the page's blocks, and the tests that run them as written (over moto, with a partner that counts)
    from tests.unit import test_flow_control_docs

    page = ROOT / FLOW_CONTROL[0][0]
    # Then those tests read this page, and each of its blocks is one they run, in the order they expect
    assert page == test_flow_control_docs.PAGE
    assert [found.key for found in blocks(page)] == list(FLOW_CONTROL)
    test_flow_control_docs.test_the_page_has_the_examples_this_test_runs()


def test_the_testing_page_runs_its_examples_in_their_own_tests():
    # Given the page's blocks, and the test that runs its Python ones as a team's project's own tests
    from tests.testing import test_testing_docs

    # Then that test reads this page, and runs each of its Python blocks
    assert ROOT / TESTING[0][0] == test_testing_docs.PAGE
    python = [found.key for found in blocks(test_testing_docs.PAGE) if found.language == "python"]
    assert python == list(TESTING)
    test_testing_docs.test_the_page_has_the_examples_this_test_runs()
    # And the explorer's command and its report are the blocks the explorer's test runs and compares
    from tests.testing import test_explore_breaks

    assert test_explore_breaks.PAGE == test_testing_docs.PAGE
    command = [found.key for found in blocks(test_explore_breaks.PAGE) if found.heading == "From the command line"]
    assert command == list(EXPLORE_COMMAND) and test_explore_breaks.PAGE_HEADING == "From the command line"
    assert test_explore_breaks.page_blocks()[0] == EXPLORE_COMMAND[0][2]


def test_the_walkthrough_shows_the_catalogues_own_job():
    # Given the walk-through's blocks and the job they describe (the reference application's money job)
    from catalogue import benefits
    from converge import Confirmation, Policy, Queue

    text = {key[1]: block(*key).text for key in reversed(WALKTHROUGH)}  # a section's first block, by its heading
    # Then its message model has the fields the block declares, with their types
    fields = benefits.PartnerBenefitCredit.model_fields
    assert list(fields) == ["partner_id", "amount_cents", "benefit"]
    assert "class PartnerBenefitCredit(JobMessage):" in text["2. The message model"]
    for name in fields:
        assert f"    {name}: " in text["2. The message model"], name
    # And the ports and the runner have the methods the blocks show
    assert {"credit", "lookup", "can_lookup"} <= set(dir(benefits.LedgerProvider))
    assert hasattr(benefits.PartnerDirectory, "get")
    runner = text["4. The runner"]
    for method in ("load", "run", "confirm"):
        assert f"    def {method}(self, message" in runner and callable(getattr(benefits.PartnerBenefitRunner, method))
    for answer in re.findall(r"Confirmation\.(\w+)", runner):
        assert answer in Confirmation.__members__, answer
    # And the binding is the catalogue's, as the block writes it, naming the model, factory and payload function
    from catalogue import bindings

    binding = bindings.PARTNER_BENEFITS
    assert (binding.job_type, binding.queue, binding.policy) == (
        "ledger.partner-benefits.v1",
        Queue.CRITICAL,
        Policy.CLAIM_THEN_EFFECT,
    )
    assert binding.message_class() is benefits.PartnerBenefitCredit
    assert binding.runner_factory() is benefits.build_runner and binding.default_enabled is False
    assert "def build_runner() -> PartnerBenefitRunner:" in text["5. The binding"]
    shown = block("docs/add-a-job.md", "5. The binding", "PARTNER_BENEFITS = JobBinding(").text
    for line in ('job_type="ledger.partner-benefits.v1"', "queue=Queue.CRITICAL", "policy=Policy.CLAIM_THEN_EFFECT"):
        assert line in shown, line
    assert f'message="{binding.message}",' in shown and f'runner="{binding.runner}",' in shown
    assert "default_enabled=False" in shown
    assert binding.on_success is not None and binding.on_success.job_type == bindings.PARTNER_CREDIT_NOTICE.job_type
    assert 'on_success=Then(PARTNER_CREDIT_NOTICE.job_type, "catalogue.benefits:notice_of"),' in shown
    assert binding.on_success.payload == NamedFunction("catalogue.benefits:notice_of")
    assert load_named("catalogue.benefits:notice_of") is benefits.notice_of
    # And the test the walk-through quotes is one of the catalogue's tests
    name = WALKTHROUGH[-1][2].split("(")[0].removeprefix("def ")
    assert f"def {name}(" in (ROOT / "tests" / "catalogue" / "test_ledger.py").read_text()


def test_the_first_job_page_shows_a_new_projects_own_files(tmp_path):
    # Given a project made by `converge init shop-jobs`, and the first-job page's blocks
    from importlib import metadata

    from converge_cli.commands.init import scaffold
    from converge_cli.commands.init_origin import named

    project = tmp_path / "shop-jobs"
    written = scaffold(project, origin=named(metadata.version("converge-jobs")))  # as installed from an index
    files = {path: path.read_text().replace(metadata.version("converge-jobs"), "X.Y.Z") for path in written}
    shown = [block(*key) for key in FIRST_JOB]
    assert len(shown) == 7
    # Then each block is a part of one of the project's files, as written (the pinned version aside)
    for b in shown:
        holders = [path.relative_to(project).as_posix() for path, text in files.items() if b.text in text]
        assert holders, f"{b.key} is in none of the project's files"
    # And none uses anything of the reference application (its settings, clients, fixtures)
    assert not [b.key for b in shown if re.search(r"catalogue\.|CatalogueSettings|\bapp\b", b.text)]


def test_the_message_examples_define_the_models_they_describe():
    # Given the two message blocks, run in order in one namespace, as a reader's interpreter would
    from converge.model.errors import InvalidMessage
    from converge.screening.message import validate_payload

    namespace: dict[str, Any] = {}
    for key in (IDENTIFIER_TYPES, ALLOWING):  # compiled apart from this module's `from __future__` flags
        exec(compile(block(*key).text, f"{key[0]}: {key[1]}", "exec", dont_inherit=True), namespace)
    credit, settlement = namespace["PartnerBenefitCredit"], namespace["Settlement"]
    # Then the credit takes ids and a bounded amount, and refuses PII and amounts out of bounds
    validate_payload(credit, {"partner_id": "p-2001", "amount_cents": 500, "benefit": "referral-bonus"})
    for bad in ({"partner_id": "ann@example.com"}, {"amount_cents": 100_001}):
        with pytest.raises(InvalidMessage):
            validate_payload(credit, {"partner_id": "p-2001", "amount_cents": 500, "benefit": "x", **bad})
    # And the settlement's field may hold a Luhn-valid reference, as the allowance says
    validate_payload(settlement, {"acquirer_ref": "4111111111111111"})
    assert settlement.allowances() == {"acquirer_ref": (namespace["Allow"]("payment_card", ALLOW_REASON),)}


def test_the_key_policy_example_admits_the_services_that_use_the_key_themselves():
    # Given the key policy statements the README gives for KmsKeyArn
    statements = json.loads(block(*KEY_POLICY).text)
    by_service = {s["Principal"]["Service"]: s for s in statements}
    # Then CloudWatch Logs may use the key for this account's log groups only, as the template's log groups need
    logs = by_service["logs.REGION.amazonaws.com"]
    assert {"kms:Encrypt*", "kms:Decrypt*", "kms:GenerateDataKey*"} <= set(logs["Action"])
    assert logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"].endswith(":ACCOUNT:log-group:*")
    # And CloudWatch alarms may publish to the topic under the key
    assert set(by_service["cloudwatch.amazonaws.com"]["Action"]) == {"kms:Decrypt", "kms:GenerateDataKey*"}
    assert all(s["Effect"] == "Allow" for s in statements) and len(statements) == 2
    # And converge's application (which the template includes) does encrypt log groups and the alarm topic with it
    # (what these statements are for)
    template = (ROOT / "shared" / "converge" / "application" / "template.yaml").read_text()
    assert "KmsKeyId: !If [HasKmsKey, !Ref KmsKeyArn, !Ref AWS::NoValue]" in template
    assert "KmsMasterKeyId: !If [HasKmsKey, !Ref KmsKeyArn, !Ref AWS::NoValue]" in template


def test_the_queue_settings_example_is_what_the_queue_settings_tests_deploy():
    # Given the example of a team's template giving converge's application its queue settings
    example = block(*QUEUE_SETTINGS).text
    # Then its settings are the lines tests/cli/test_queue_settings.py adds to a scaffolded project and deploys,
    # below the parameters `converge init` writes, in the application the scaffold includes
    assert example.endswith(queue_settings.GIVEN)
    assert "      Location: .converge/application/template.yaml\n" in example
    scaffold = (ROOT / "infra" / "converge_cli" / "scaffold" / "template.yaml").read_text()
    assert "Location: .converge/application/template.yaml" in scaffold


ALLOW_REASON = "the acquirer's references pass the Luhn check"


# -- the session: one local cloud, one shell, the README's blocks in order ---------------------------------------


def as_written(b: Block, port: int) -> str:
    return b.text.replace("4566", str(port))


@dataclass
class Session:
    cwd: Path
    port: int
    env: dict[str, str]
    server: subprocess.Popen[str]

    @property
    def info(self) -> dict[str, Any]:
        return json.loads((self.cwd / ".converge" / "outputs.json").read_text())

    def bash(self, script: str) -> subprocess.CompletedProcess[str]:
        completed = subprocess.run(
            ["bash", "-c", "set -eo pipefail\n" + script],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == 0, f"{script}\n--- stdout\n{completed.stdout}\n--- stderr\n{completed.stderr}"
        return completed

    def python(self, code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        """Run a Python block in a fresh interpreter; its globals (JSON-able ones) come back."""
        runner = code + GLOBALS_AS_JSON
        completed = subprocess.run(
            [str(BIN / "python"), "-c", runner],
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert completed.returncode == 0, f"{code}\n--- stderr\n{completed.stderr}"
        return json.loads(completed.stdout.splitlines()[-1])

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            endpoint_url=self.info["endpoint_url"],
            region_name="us-east-1",
            aws_access_key_id="local",
            aws_secret_access_key="local",
        )

    def state(self, operation_id: str) -> str | None:
        """The operation's state as converge stored it (the state table; the jobs table holds the request)."""
        item = self.client("dynamodb").get_item(
            TableName=self.info["outputs"]["StateTableName"],  # converge's state, apart from the request
            Key={"operation_id": {"S": operation_id}},
            ConsistentRead=True,
        )
        return item.get("Item", {}).get("state", {}).get("S")


# Appended to a Python block: print its JSON-able globals as the last line, for the test to read back.
GLOBALS_AS_JSON = """
import json as _json, sys as _sys
_plain = {k: v for k, v in dict(globals()).items() if not k.startswith("_") and isinstance(v, (int, str, dict, list))}
_sys.stdout.write("\\n" + _json.dumps(_plain, default=str))
"""


def wait_for(condition: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    return condition()


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    if not shutil.which("aws") or not shutil.which("curl"):
        pytest.skip("the README's shell examples use the AWS CLI and curl; install both to run them")
    cwd = tmp_path_factory.mktemp("readme")
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AWS_", "CONVERGE_")) and key not in ("COLUMNS",)
    }
    # A reader's shell with the project's virtual environment active, and no AWS settings of its own.
    env |= {"PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}", "COLUMNS": "200", "AWS_EC2_METADATA_DISABLED": "true"}
    # The working directory is a fresh one, so the project (found from the directory upward) is named.
    env["CONVERGE_TEMPLATE"] = str(ROOT / "template.yaml")
    # Given the README's own `converge local up`, started as a reader starts it (in its own terminal)
    command = as_written(block(*LOCAL_UP), 0).strip()
    server = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert wait_for((cwd / ".converge" / "outputs.json").exists, timeout=180), "local up never became ready"
        endpoint = json.loads((cwd / ".converge" / "outputs.json").read_text())["endpoint_url"]
        yield Session(cwd, int(endpoint.rsplit(":", 1)[1]), env, server)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=60)
    # And when it stops, its outputs file is gone
    assert not (cwd / ".converge" / "outputs.json").exists()


@pytest.fixture(scope="module")
def ran(session: Session) -> dict[str, Any]:
    """Every `Run` block, in README order across the session; what each printed or left behind."""
    results: dict[str, Any] = {}
    outputs = session.info["outputs"]
    # The library block, with what it names but leaves to the reader: `dynamodb` and `your_business_put`
    library = (
        "import boto3\n"
        "dynamodb = boto3.client('dynamodb')\n"
        f"your_business_put = {{'Put': {{'TableName': {outputs['AppTableName']!r}, "
        "'Item': {'pk': {'S': 'order#readme-1'}}}}\n" + block(*LIBRARY).text
    )
    library_env = {
        "AWS_ENDPOINT_URL": session.info["endpoint_url"],
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "JOBS_TABLE": outputs["JobsTableName"],
        "MARKERS_TABLE": outputs["MarkersTableName"],
        "STATE_TABLE": outputs["StateTableName"],
        "CONVERGE_CATALOGUE": "catalogue",
        # the catalogue is the project's code, importable where its layer has it (as on Lambda)
        "PYTHONPATH": str(ROOT / "shared"),
    }
    results["library"] = session.python(library, library_env)
    # As a reader's terminal would: the money job, its switch off, is PAUSED before the next block turns it on
    # (run at once, the next block could turn it on before the worker first received it)
    assert wait_for(lambda: session.state("benefit-2026-11-0042") == "PAUSED"), session.state("benefit-2026-11-0042")
    # The terminal block, the CLI's enqueue and the API examples: one shell, as one reader's terminal.
    # The API block's first line is the server already running (the same command, on the README's port).
    api_lines = block(*API_EXAMPLES).text.splitlines()
    assert api_lines[0].startswith("converge local up --outputs-file .converge/outputs.json")
    script = "\n".join(
        [
            as_written(block(*TERMINAL), session.port),
            as_written(block(*CLI_ENQUEUE), session.port),
            *api_lines[1:],
            'echo "API=$API"',
            as_written(block(*CURL), session.port),
        ]
    )
    results["shell"] = session.bash(script)
    results["sigv4"] = session.python(
        block(*SIGV4).text, {"AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_REGION": "us-east-1"}
    )
    return results


@pytest.mark.slow  # `converge local up` in its own process, and every block of the pages run against it
def test_the_readme_examples_run_as_written_and_do_what_they_say(session, ran):
    shell = ran["shell"].stdout
    # The put-item's job runs to SUCCEEDED (its user is seeded), and `ops show` printed it
    assert "reset-0001" in shell
    assert wait_for(lambda: session.state("reset-0001") == "SUCCEEDED")
    # The library's enqueue and the CLI's are the same operation (same id, same payload): no conflict
    assert "reset-7f3a already exists with the same content" in shell
    assert wait_for(lambda: session.state("reset-7f3a") == "SUCCEEDED")
    # The library's enqueue_put went in with the business write, paused while the money job was off,
    # then resumed when the README's put-parameter turned it on
    assert wait_for(lambda: session.state("benefit-2026-11-0042") == "SUCCEEDED")

    record = session.client("dynamodb").get_item(
        TableName=session.info["outputs"]["StateTableName"], Key={"operation_id": {"S": "benefit-2026-11-0042"}}
    )["Item"]
    assert "PAUSED" in [entry.state for entry in record_from_item(record).history]
    app_table = session.info["outputs"]["AppTableName"]
    assert "Item" in session.client("dynamodb").get_item(TableName=app_table, Key={"pk": {"S": "order#readme-1"}})
    # The v1-proof `aws sqs` call listed the local queues
    assert session.info["outputs"]["CriticalQueueUrl"].rsplit("/", 1)[1] in shell
    # curl's POST was admitted, signed with the local key pair
    assert '"state": "ACCEPTED"' in shell or '"state":"ACCEPTED"' in shell
    # The Python SigV4 snippet got its 202 and then the operation
    assert ran["sigv4"]["status"] == 200 and ran["sigv4"]["accepted"]["job_type"] == "email.password-reset.v1"


def test_the_api_answers_as_the_readme_shows(ran):
    # The POST response block: 202 and its body's keys; the GET block: the operation's keys
    post = block(*POST_RESPONSE).text
    body = json.loads(post.split("\n\n", 1)[1])
    accepted, operation = ran["sigv4"]["accepted"], ran["sigv4"]["operation"]
    assert post.startswith("HTTP/1.1 202 Accepted") and set(accepted) == set(body)
    assert accepted["state"] == "ACCEPTED" and accepted["operation_id"].startswith("api-")
    shown = json.loads(block(*GET_RESPONSE).text)
    assert set(operation) == set(shown) and operation["operation_id"] == accepted["operation_id"]


def test_the_operating_commands_run_with_real_ids(session, ran):
    # Given an UNKNOWN operation in the local cloud (the placeholders of the block get real values)
    from converge.model.states import OperationState
    from converge_cli.support.target import Target
    from tests.conftest import drive_to

    converge = Target(endpoint_url=session.info["endpoint_url"]).converge
    # The cloud keeps running the pipeline: switch the job off first, so the operation waits where it is
    toggle = converge.settings.toggle_parameter("partner-docs.upload")
    session.client("ssm").put_parameter(Name=toggle, Value="off", Type="String", Overwrite=True)
    converge.enqueue("partner-docs.upload.v1", "readme-unknown-1", {"partner_id": "p-9", "upload_id": "u"})
    # It pauses; then an attempt's outcome is ambiguous (through the store's own writes, as a worker's)
    assert wait_for(lambda: session.state("readme-unknown-1") == "PAUSED")
    drive_to(converge.operations, converge.operations.require("readme-unknown-1"), OperationState.UNKNOWN)
    substitutions = {
        "OPERATION_ID": "readme-unknown-1",
        "succeeded|failed|retry": "failed",
    }
    script = block(*OPERATING).text
    for placeholder, value in substitutions.items():
        script = script.replace(placeholder, value)
    env = {"AWS_ENDPOINT_URL": session.info["endpoint_url"], "AWS_ACCESS_KEY_ID": "l", "AWS_SECRET_ACCESS_KEY": "l"}
    completed = session.bash("\n".join(f"export {k}={v}" for k, v in env.items()) + "\n" + script)
    # Then every line ran: the resolve was recorded, the retry sent it again, the listing and status printed
    assert "readme-unknown-1 resolved as failed: UNKNOWN -> FAILED" in completed.stdout
    assert "readme-unknown-1 retried: sent again with the same identity: FAILED -> ACCEPTED" in completed.stdout
    assert "no index serves this listing" in completed.stdout and "needs attention" in completed.stdout
    reasons = [entry.reason for entry in converge.operations.require("readme-unknown-1").history]
    assert any(reason.startswith("retried by cli:") and reason.endswith(": the provider is back") for reason in reasons)
    session.client("ssm").put_parameter(Name=toggle, Value="on", Type="String", Overwrite=True)


def test_the_console_starts_as_written_and_serves_its_pages(session):
    # Given the README's console command, against the session's local cloud
    import http.cookiejar
    import re
    import urllib.error
    import urllib.request

    command = as_written(block(*CONSOLE), session.port).split("#")[0].strip()
    console = subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=session.cwd,
        env=session.env | WITH_STACKS,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=as_a_shell_starts_it,
    )
    try:
        assert console.stdout is not None
        # When it starts, it prints the line the README shows, with its URL and this start's key
        line = console.stdout.readline()
        match = re.fullmatch(r"console ((http://127\.0\.0\.1:\d+/)\?token=[\w-]{40,}) \(Ctrl-C to stop\)\n", line)
        assert match, line
        printed, address = match.groups()
        # Then its address alone is refused, saying to open the printed URL
        with pytest.raises(urllib.error.HTTPError) as locked:
            urllib.request.urlopen(address, timeout=30)
        assert locked.value.code == 403 and "Open the URL that" in locked.value.read().decode()
        # And the printed URL (its key exchanged for a session cookie) opens the overview
        browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with browser.open(printed, timeout=30) as response:
            assert response.status == 200 and response.url == address
            assert "needs attention" in response.read().decode()
        # And a POST without the form token is refused, even in that session
        forged = urllib.request.Request(address + "toggles/pdf.cv", data=b"value=off&reason=x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as refused:
            browser.open(forged, timeout=30)
        assert refused.value.code == 403 and "token" in refused.value.read().decode()
    finally:
        stopped_with_ctrl_c(console, "the console")
