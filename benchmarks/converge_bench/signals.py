"""What a signal costs: a job that waits for one (`ctx.wait_for`), beside a plain job and a job that waits for a time
(`ctx.wait`), and beside the same wait on Step Functions (a task token) and Lambda durable functions (a callback).

The three run the same way (`ConvergeBench.run`), one after the other, on one deployment. The signalled job is a
step, a wait for the signal `go` (a day at most: its timeout is a one-time schedule), a step; once every job of the
sample waits, a producer sends each its signal (`Converge.signal`, with its own clients: its reads and writes are
metered as the application's, as a producer's are) and the cloud drains again. The time wait is the same two steps
around a 300 s wait (an SQS message delay). Everything the sample cost is divided by its jobs: the wait's markers,
the signal's item, the sender's read and its wake, the SQS messages and the Lambda requests.

Priced beside it (US$ per million jobs, the effects' own compute left out on every side, as the shapes are):
- Step Functions, standard workflow: a Task per step and a `.waitForTaskToken` Task for the wait, one state
  transition each, plus one Lambda request per step; `SendTaskSuccess` is not billed apart (the pricing page
  charges state transitions only).
- Lambda durable functions: one durable operation per step, one for the callback and one for the execution, plus
  one request for the first invocation and one for the invocation the callback's completion resumes
  (`SendDurableExecutionCallbackSuccess` is not billed apart on the pricing page).
"""

from __future__ import annotations

from typing import Any

import boto3

from converge.model.submission import SignalSubmission
from converge.runtime import Converge
from converge.runtime.clients import Clients
from converge_bench import jobs as bench_jobs
from converge_bench import noop_jobs
from converge_bench.prices import PRICES
from localcloud.outputs import settings_from_outputs

STEPS = 2
"""Steps around the wait, in the time wait's job and the signalled one alike."""
ROWS = {"plain": bench_jobs.NOOP, "time_wait": bench_jobs.WAITING, "signal_wait": bench_jobs.SIGNALLED}


def sender(cloud: Any, region: str) -> Converge:
    """A producer's converge: its own clients (metered as the application's), the cloud's clock."""
    session = boto3.session.Session(region_name=region)
    clients = Clients(**{service: session.client(service) for service in ("dynamodb", "sqs", "ssm", "scheduler")})
    return Converge(
        settings_from_outputs(cloud.outputs, cloud.catalogue),
        registry=cloud.registry,
        clients=clients,
        clock=cloud.clock,
    )


def measure(bench: Any, jobs: int, region: str = "us-east-1") -> dict[str, Any]:
    """Per job of each row: DynamoDB units (index writes included), SQS, Lambda and scheduler requests, priced."""
    producer = sender(bench.cloud, region)
    answers: dict[str, int] = {}

    def signal(operation_id: str) -> None:
        receipt = producer.signals.send(
            SignalSubmission(operation_id, noop_jobs.SIGNAL, {"decision": "go"}, sent_by="bench")
        )
        answers[receipt.answer.value] = answers.get(receipt.answer.value, 0) + 1

    figures: dict[str, Any] = {}
    for name, job_type in ROWS.items():
        follow = signal if job_type == bench_jobs.SIGNALLED else None
        sample = bench.run(jobs, job_type=job_type, prefix=f"signal-{name}", follow=follow)
        figures[name] = _row(job_type, sample)
    figures["signal_wait"]["signals_accepted"] = f"{answers.get('accepted', 0)}/{jobs}"
    for name in ("time_wait", "signal_wait"):
        row = figures[name]
        row["extra_write_units_per_job"] = round(
            row["write_units_per_job"] - figures["plain"]["write_units_per_job"], 4
        )
        row["extra_read_units_per_job"] = round(row["read_units_per_job"] - figures["plain"]["read_units_per_job"], 4)
    signalled, timed = figures["signal_wait"], figures["time_wait"]
    figures["signal_over_time_wait_write_units_per_job"] = round(
        signalled["write_units_per_job"] - timed["write_units_per_job"], 4
    )
    figures["signal_over_time_wait_read_units_per_job"] = round(
        signalled["read_units_per_job"] - timed["read_units_per_job"], 4
    )
    figures["step_functions_task_token_usd_per_million"] = round(step_functions_usd(STEPS), 4)
    figures["durable_functions_callback_usd_per_million"] = round(durable_functions_usd(STEPS), 4)
    usd = signalled["usd_per_million_jobs"]
    figures["ratio_to_step_functions"] = round(usd / figures["step_functions_task_token_usd_per_million"], 4)
    figures["ratio_to_durable_functions"] = round(usd / figures["durable_functions_callback_usd_per_million"], 4)
    return figures


def _row(job_type: str, sample: Any) -> dict[str, Any]:
    usage = sample.usage.application
    per_job = {
        "write_units": usage.write_units / sample.jobs,
        "read_units": usage.read_units / sample.jobs,
        "sqs_requests": usage.sqs_requests / sample.jobs,
        "lambda_requests": sum(sample.invocations.values()) / sample.jobs,
    }
    scheduler = sum(count for call, count in usage.calls.items() if call.startswith("scheduler:")) / sample.jobs
    usd = 1e6 * (
        per_job["write_units"] * PRICES.dynamodb_write_unit
        + per_job["read_units"] * PRICES.dynamodb_read_unit
        + per_job["sqs_requests"] * PRICES.sqs_request
        + per_job["lambda_requests"] * PRICES.lambda_request
    )
    return {
        "job_type": job_type,
        "write_units_per_job": round(per_job["write_units"], 4),
        "index_write_units_per_job": round(usage.index_write_units / sample.jobs, 4),
        "read_units_per_job": round(per_job["read_units"], 4),
        "sqs_requests_per_job": round(per_job["sqs_requests"], 4),
        "lambda_requests_per_job": round(per_job["lambda_requests"], 4),
        "scheduler_requests_per_job": round(scheduler, 4),
        "usd_per_million_jobs": round(usd, 4),
        "completed": f"{sample.completed}/{sample.jobs}",
    }


def step_functions_usd(steps: int) -> float:
    """A standard workflow: a Task per step and the `.waitForTaskToken` Task, one transition each; a Lambda request
    per step."""
    return 1e6 * ((steps + 1) * PRICES.step_functions_transition + steps * PRICES.lambda_request)


def durable_functions_usd(steps: int) -> float:
    """A durable function: an operation per step, the callback and the execution; a request for the first
    invocation and one for the invocation the callback's completion resumes."""
    return 1e6 * ((steps + 2) * PRICES.durable_operation + 2 * PRICES.lambda_request)
