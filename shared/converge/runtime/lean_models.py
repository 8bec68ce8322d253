"""How converge's own clients load botocore's service models: those of the few operations they call first, and by
asking about the one service a client is made for.

botocore builds a client from its service's whole model: SSM's describes some 150 operations (900 KB of JSON),
and making a client of it took some 35 ms of a worker's cold start, more than a tenth, for the one operation a
worker calls (GetParameter, the kill switch). converge's runtime gives its clients a loader that finds these
models first (`Clients(models=LEAN_MODELS)`); a client made any other way (a runner's, `Clients()`) has botocore's
full model. A model here is botocore's own, cut to `OPERATIONS` and what they reference, documentation left out;
`python -m converge.runtime.lean_models` writes them again from the installed botocore, and a test checks that the
shipped files are what it writes.

`ServiceLoader` is botocore's loader, except that making a client asks its data directories about that service
alone: botocore checks a service's name against the list of every service it has, made by listing each of some 430
service directories and their versions, about 10 ms of a cold start, twice (the model and its endpoint rules).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from botocore.exceptions import DataNotFoundError
from botocore.loaders import Loader

LEAN_MODELS = Path(__file__).parent / "service_models"
"""A botocore data directory: `<service>/<api version>/service-2.json`."""

OPERATIONS: dict[str, tuple[str, ...]] = {
    "ssm": ("GetParameter", "PutParameter"),  # a toggle's read (converge.flow.toggles) and an operator's set
}
"""Per service, every operation converge's own code calls on it."""


class ServiceLoader(Loader):
    """botocore's loader; asked for a service it has, it looks in that service's directories alone. Asked for any other,
    it does what botocore does: the list of every service, and UnknownServiceError naming them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._asking = threading.local()  # the service a model is being loaded for, in this thread

    def load_service_model(self, service_name: str, type_name: str, api_version: str | None = None) -> Any:
        self._asking.service = service_name
        try:
            return super().load_service_model(service_name, type_name, api_version)
        finally:
            self._asking.service = None

    def list_available_services(self, type_name: str) -> list[str]:
        service = getattr(self._asking, "service", None)
        if service is not None:
            try:
                self.list_api_versions(service, type_name)
            except DataNotFoundError:
                pass  # not a service of these directories: botocore's own answer, with its error
            else:
                return [service]
        return super().list_available_services(type_name)


def cut(model: dict[str, Any], operations: tuple[str, ...]) -> dict[str, Any]:
    """`model` with only `operations` and the shapes they reach (inputs, outputs, errors), without documentation."""
    shapes = model["shapes"]
    reached: set[str] = set()
    pending = [
        reference["shape"]
        for name in operations
        for reference in (
            model["operations"][name].get("input"),
            model["operations"][name].get("output"),
            *model["operations"][name].get("errors", []),
        )
        if reference
    ]
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        shape = shapes[name]
        members = [shape.get("member"), shape.get("key"), shape.get("value"), *(shape.get("members") or {}).values()]
        pending.extend(member["shape"] for member in members if member)
    kept = {
        "version": model.get("version"),
        "metadata": model["metadata"],
        "operations": {name: model["operations"][name] for name in operations},
        "shapes": {name: shapes[name] for name in sorted(reached)},
    }
    return _without_documentation(kept)


def _without_documentation(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_documentation(inner) for key, inner in value.items() if key != "documentation"}
    if isinstance(value, list):
        return [_without_documentation(inner) for inner in value]
    return value


def lean_models() -> dict[Path, str]:
    """Each lean model's file (under LEAN_MODELS) and its text, cut from the installed botocore's models."""
    loader = Loader()
    files = {}
    for service, operations in OPERATIONS.items():
        version = loader.determine_latest_version(service, "service-2")
        model = cut(loader.load_service_model(service, "service-2", version), operations)
        files[LEAN_MODELS / service / version / "service-2.json"] = json.dumps(model, indent=1, sort_keys=True) + "\n"
    return files


def main() -> None:
    for path, text in lean_models().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
