"""An operator's decision on an UNKNOWN operation: now `Operator.resolve` (converge.operator); kept as an alias."""

from converge.operator import ActionResult, Operator
from converge.operator import Outcome as Resolution

__all__ = ["ActionResult", "Operator", "Resolution"]
