"""Reconciler: on a schedule, lists open operations nothing will move on and re-dispatches what is safe."""

from converge.runtime import Converge
from converge.runtime.handlers import lambda_handler

converge = Converge.from_env()
handler = lambda_handler(converge, "reconciler")
