"""Recurring jobs: each schedule passes {"job_type": ...}; a disabled job's tick is a logged skip."""

from converge.runtime import Converge
from converge.runtime.handlers import lambda_handler

converge = Converge.from_env()
handler = lambda_handler(converge, "recurring")
