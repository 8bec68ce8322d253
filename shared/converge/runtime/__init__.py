"""The runtime: settings, clients, and the composition root that builds every part."""

from converge.runtime.root import Converge

__all__ = ["Converge"]
