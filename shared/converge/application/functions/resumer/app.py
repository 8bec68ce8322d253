"""Resumer: re-dispatches PAUSED work when a toggle changes, and on a schedule as a safety net."""

from converge.runtime import Converge
from converge.runtime.handlers import lambda_handler

converge = Converge.from_env()
handler = lambda_handler(converge, "resumer")
