"""The runtime: settings, clients, and the composition root that builds every part.

`Converge` is imported on first use (PEP 562): a function's `app.py` imports `converge.runtime.startup` before
anything else is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from converge.runtime.root import Converge

__all__ = ["Converge"]


def __getattr__(name: str) -> Any:
    if name != "Converge":
        raise AttributeError(f"module 'converge.runtime' has no attribute {name!r}")
    from converge.runtime.root import Converge

    globals()[name] = Converge
    return Converge
