"""Outbox relay: the jobs table's stream (new and re-dispatched operations) to the SQS queues."""

from converge.runtime import Converge
from converge.runtime.handlers import lambda_handler

converge = Converge.from_env()
handler = lambda_handler(converge, "relay")
