"""Run the template's Lambda functions in this process, each with its own module and environment.

Each function's handler file is imported by path under a unique module name
(`converge_fn_<logical id lowercased>`), so the three workers that share functions/worker/app.py get
three modules, as three Lambda functions would get three processes. Function directories are never
put on sys.path. The function's environment (Globals merged with its own, intrinsics resolved against
the deployed stack) is applied to os.environ during the import (the cold start) and during every
invocation, then the previous environment is restored.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from converge.flow.extensions import Extension
from converge.runtime import Converge

from .clock import EmulatedClock

if TYPE_CHECKING:
    from .effect_log import EffectLog
    from .iam import AccessCheck

LOG_LINES_KEPT = 2_000

Handler = Callable[[Any, Any], Any]


@dataclass(frozen=True)
class FunctionSpec:
    """One deployed function as the local cloud runs it."""

    logical_id: str
    name: str
    arn: str
    code_dir: Path
    handler: str
    runtime: str
    timeout: int
    memory_mb: int
    log_group_name: str
    environment: dict[str, str] = field(default_factory=dict)

    @property
    def module_name(self) -> str:
        return f"converge_fn_{self.logical_id.lower()}"

    @property
    def handler_file(self) -> Path:
        module_path, _, _ = self.handler.rpartition(".")
        return self.code_dir / (module_path.replace(".", "/") + ".py")

    @property
    def handler_attribute(self) -> str:
        return self.handler.rpartition(".")[2]


class LambdaContext:
    """The context object the Python runtime passes to a handler, timed by what the function itself spent.

    A function's time is the emulated time moved while it ran (a fault that stalls it, a test's advance) plus the
    processor time of its own thread. The wall clock is not its time: on a shared machine another process, a pause
    of this one or a step of the system clock would time out a handler that did nothing slow."""

    def __init__(self, spec: FunctionSpec, clock: EmulatedClock, request_id: str | None = None) -> None:
        self.function_name = spec.name
        self.function_version = "$LATEST"
        self.invoked_function_arn = spec.arn
        self.memory_limit_in_mb = spec.memory_mb
        self.aws_request_id = request_id or str(uuid.uuid4())
        self.log_group_name = spec.log_group_name
        self.log_stream_name = f"local/[$LATEST]{uuid.uuid4().hex}"
        self.identity = None
        self.client_context = None
        self.tenant_id = None
        self._clock = clock
        self._timeout = spec.timeout
        self._offset_at_start = clock.offset
        self._processor_time_at_start = time.thread_time()

    def spent(self) -> float:
        """Seconds this invocation has used: emulated time moved since it began, and its thread's processor time."""
        moved = self._clock.offset - self._offset_at_start
        return moved + time.thread_time() - self._processor_time_at_start

    def timed_out(self) -> bool:
        return self.spent() > self._timeout

    def get_remaining_time_in_millis(self) -> int:
        return max(int((self._timeout - self.spent()) * 1000), 0)


class LambdaTimeoutError(RuntimeError):
    """The handler used more emulated time than the function's Timeout (Lambda would have killed it)."""


@dataclass
class Invocation:
    """What one invocation received and returned; kept for tests and the demo."""

    logical_id: str
    request_id: str
    event: Any
    result: Any = None
    error: BaseException | None = None


@contextlib.contextmanager
def applied_environment(variables: dict[str, str]) -> Iterator[None]:
    """Set environment variables for the duration of the block, then restore the previous values."""
    previous = {key: os.environ.get(key) for key in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class FunctionRuntime:
    """Loads handler modules (cold start) and invokes them (warm), one invocation at a time."""

    def __init__(
        self,
        specs: dict[str, FunctionSpec],
        clock: EmulatedClock,
        platform_environment: dict[str, str],
        history_limit: int | None = None,
        catalogue: str | None = None,
    ) -> None:
        """`catalogue`, when given, is the job catalogue every function that names one loads instead."""
        self.specs = specs
        self.clock = clock
        self._platform_environment = platform_environment
        self._catalogue = catalogue
        self._modules: dict[str, ModuleType] = {}
        self._overrides: dict[str, Handler] = {}
        # os.environ is process-wide: invocations are serialised so environments never mix.
        self._lock = threading.RLock()
        self.invocations: deque[Invocation] = deque(maxlen=history_limit)
        self.invocation_counts: Counter[str] = Counter()  # never truncated, unlike the history
        # What handlers print (Powertools' JSON logs and EMF metrics), per function: the log group.
        self.logs: dict[str, deque[str]] = {logical_id: deque(maxlen=LOG_LINES_KEPT) for logical_id in specs}
        # Called with (logical id, line) for every complete line a function prints (`converge local up --logs`).
        self.log_listeners: list[Callable[[str, str], None]] = []
        # The IAM check (localcloud.iam): each function's API calls, at cold start and in every invocation,
        # are authorised against its role. None: calls run unchecked.
        self.access: AccessCheck | None = None
        # The effects each invocation makes on the template's own resources (localcloud.effect_log), or None.
        self.effects: EffectLog | None = None
        # The extensions every function's runtime has (the fault injector adds itself): given to each function's
        # runtime as its module is imported, and to every such runtime when one is added later.
        self.extensions = CloudExtensions()

    def environment_of(self, logical_id: str) -> dict[str, str]:
        """Everything the function sees in os.environ: platform variables, then its own."""
        spec = self.specs[logical_id]
        lambda_variables = {
            "AWS_LAMBDA_FUNCTION_NAME": spec.name,
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
            "AWS_LAMBDA_LOG_GROUP_NAME": spec.log_group_name,
            "AWS_EXECUTION_ENV": f"AWS_Lambda_{spec.runtime}",
            "LAMBDA_TASK_ROOT": str(spec.code_dir),
            "_HANDLER": spec.handler,
        }
        own = dict(spec.environment)
        if self._catalogue and "CONVERGE_CATALOGUE" in own:
            own["CONVERGE_CATALOGUE"] = self._catalogue
        return {**self._platform_environment, **lambda_variables, **own}

    def override_handler(self, logical_id: str, handler: Handler | None) -> None:
        """Substitute a handler for a function (None restores the real one). The environment still applies."""
        if logical_id not in self.specs:
            raise KeyError(f"no function {logical_id!r} in the template")
        if handler is None:
            self._overrides.pop(logical_id, None)
        else:
            self._overrides[logical_id] = handler

    def module(self, logical_id: str) -> ModuleType:
        """The function's handler module, imported on first use with the function's environment."""
        with self._lock:
            if logical_id not in self._modules:
                spec = self.specs[logical_id]
                with (
                    applied_environment(self.environment_of(logical_id)),
                    self._captured_output(logical_id),
                    self._acting_as(logical_id),
                ):
                    module = _import_by_path(spec.module_name, spec.handler_file)
                _join_the_cloud(module, self.clock, self.extensions)
                self._modules[logical_id] = module
            return self._modules[logical_id]

    @contextlib.contextmanager
    def _captured_output(self, logical_id: str) -> Iterator[None]:
        """Route the handler's stdout to the function's log lines, as Lambda routes it to CloudWatch Logs."""
        sink = _LogSink(
            self.logs.setdefault(logical_id, deque(maxlen=LOG_LINES_KEPT)),
            functools.partial(self._tell_listeners, logical_id),
        )
        with contextlib.redirect_stdout(sink):  # type: ignore[type-var]
            yield

    def _acting_as(self, logical_id: str) -> contextlib.AbstractContextManager[None]:
        return self.access.acting_as(logical_id) if self.access is not None else contextlib.nullcontext()

    def _effects_by(self, logical_id: str) -> contextlib.AbstractContextManager[None]:
        return self.effects.invocation(logical_id) if self.effects is not None else contextlib.nullcontext()

    def log(self, logical_id: str, line: str) -> None:
        """Add a line to a function's log, as the platform does (the IAM check's denials)."""
        self.logs.setdefault(logical_id, deque(maxlen=LOG_LINES_KEPT)).append(line)
        self._tell_listeners(logical_id, line)

    def _tell_listeners(self, logical_id: str, line: str) -> None:
        for listener in self.log_listeners:
            try:
                listener(logical_id, line)
            except Exception:  # a watcher of the logs must never fail the function that logged
                continue

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """No function runs inside this block (one that is running finishes first).

        A function's log capture swaps sys.stdout process-wide; code in the same process that swaps it
        too (a CLI test runner capturing a command's output) holds the functions off meanwhile."""
        with self._lock:
            yield

    def cold_start(self, logical_id: str | None = None) -> None:
        """Forget loaded modules so the next invocation imports again (a new execution environment)."""
        with self._lock:
            for lid in [logical_id] if logical_id else list(self._modules):
                module = self._modules.pop(lid, None)
                if module is not None:
                    sys.modules.pop(module.__name__, None)

    def invoke(self, logical_id: str, event: Any, request_id: str | None = None) -> Any:
        """Invoke synchronously, as Lambda's RequestResponse; handler exceptions propagate."""
        with self._lock:
            spec = self.specs[logical_id]
            handler = self._overrides.get(logical_id) or getattr(self.module(logical_id), spec.handler_attribute)
            context = LambdaContext(spec, self.clock, request_id)
            record = Invocation(logical_id, context.aws_request_id, event)
            self.invocations.append(record)
            self.invocation_counts[logical_id] += 1
            with (
                applied_environment(self.environment_of(logical_id)),
                self._captured_output(logical_id),
                self._acting_as(logical_id),
                self._effects_by(logical_id),
            ):
                try:
                    record.result = handler(event, context)
                except BaseException as exc:
                    record.error = exc
                    raise
                finally:
                    if record.error is None and context.timed_out():
                        record.error = LambdaTimeoutError(
                            f"{spec.name} Task timed out after {spec.timeout:.2f} seconds"
                        )
                        record.result = None
            if record.error is not None:
                raise record.error
            return record.result


class _LogSink:
    """A write-only text stream that keeps complete lines in a bounded deque."""

    def __init__(self, lines: deque[str], on_line: Callable[[str], object] | None = None) -> None:
        self._lines = lines
        self._on_line = on_line
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *complete, self._partial = self._partial.split("\n")
        for line in complete:
            if line:
                self._lines.append(line)
                if self._on_line:
                    self._on_line(line)
        return len(text)

    def flush(self) -> None:
        pass


class CloudExtensions:
    """The extensions of every function's runtime in one cloud: each joins every runtime, those imported already
    and those imported later (each runtime keeps its own set, with its own continuations and batches)."""

    def __init__(self) -> None:
        self._members: list[Extension] = []
        self._runtimes: list[Converge] = []

    def add(self, extension: Extension) -> None:
        if extension in self._members:
            return
        self._members.append(extension)
        for runtime in self._runtimes:
            runtime.extensions.add(extension)

    def remove(self, extension: Extension) -> None:
        if extension in self._members:
            self._members.remove(extension)
            for runtime in self._runtimes:
                runtime.extensions.remove(extension)

    def join(self, runtime: Converge) -> None:
        self._runtimes.append(runtime)
        for extension in self._members:
            runtime.extensions.add(extension)

    def __iter__(self) -> Iterator[Extension]:
        return iter(list(self._members))


def _join_the_cloud(module: ModuleType, clock: EmulatedClock, extensions: CloudExtensions) -> None:
    """Give a handler's converge runtime the cloud's clock, so leases and backoff follow advance(), and the cloud's
    extensions (before its pipeline is built: a function builds its parts on its first invocation)."""
    runtime = getattr(module, "converge", None)
    if isinstance(runtime, Converge):
        runtime.clock = clock
        extensions.join(runtime)


def _import_by_path(module_name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load handler module from {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
