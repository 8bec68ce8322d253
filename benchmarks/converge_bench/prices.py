"""On-demand prices, us-east-1, and what a job's measured usage costs at them.

Sources (checked 2025-01; the DynamoDB figures are the on-demand prices after the November 2024 cut):
  https://aws.amazon.com/dynamodb/pricing/on-demand/   WRU $0.625/M, RRU $0.125/M; Streams GetRecords
                                                        made by a Lambda trigger are free
  https://aws.amazon.com/sqs/pricing/                   standard queue $0.40/M requests (each 64 KB chunk
                                                        of a request's payload is one request)
  https://aws.amazon.com/lambda/pricing/                $0.20/M requests; Arm $0.0000133334 per GB-second
  https://aws.amazon.com/cloudwatch/pricing/            Logs ingestion (Standard) $0.50/GB
  https://aws.amazon.com/systems-manager/pricing/       GetParameter on standard parameters with standard
                                                        throughput: no charge
  https://aws.amazon.com/lambda/pricing/                SnapStart (Python and .NET, since 2024-11): cache
                                                        $0.0000015046 per GB-second while a version is
                                                        active, restore $0.0001397998 per GB restored
                                                        (checked 2026-12, us-east-1)
  https://aws.amazon.com/lambda/pricing/                Lambda durable functions: $8.00 per million durable
                                                        operations (steps, waits, the execution), plus the
                                                        function's requests (checked 2026-12, us-east-1)
  https://aws.amazon.com/step-functions/pricing/        Standard workflows: $25 per million state
                                                        transitions (checked 2026-12, us-east-1)
Free tiers are ignored: the figure is the marginal cost of one more million jobs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

PRICES_AS_OF = "2025-01 (DynamoDB on-demand after the 2024-11-01 price cut)"


@dataclass(frozen=True)
class Prices:
    dynamodb_write_unit: float = 0.625 / 1e6
    dynamodb_read_unit: float = 0.125 / 1e6
    sqs_request: float = 0.40 / 1e6
    lambda_request: float = 0.20 / 1e6
    lambda_gb_second_arm: float = 0.0000133334
    logs_ingestion_gb: float = 0.50
    snapstart_cache_gb_second: float = 0.0000015046
    snapstart_restore_gb: float = 0.0001397998
    durable_operation: float = 8.00 / 1e6
    step_functions_transition: float = 25.0 / 1e6

    def to_json(self) -> dict[str, float | str]:
        return {
            "as_of": PRICES_AS_OF,
            "snapstart_as_of": SNAPSTART_AS_OF,
            "orchestration_as_of": ORCHESTRATION_AS_OF,
            "region": "us-east-1",
            **asdict(self),
        }


PRICES = Prices()
SNAPSTART_AS_OF = "2026-12 (SnapStart for Python, us-east-1)"
ORCHESTRATION_AS_OF = "2026-12 (Lambda durable functions, Step Functions standard workflows, us-east-1)"
LAMBDA_MB_PER_VCPU = 1769
"""Lambda gives a function one vCPU at 1,769 MB and a share in proportion below: a CPU-bound start takes
longer at 512 MB than on a full core, by the same factor for every design."""
MONTH_SECONDS = 30 * 24 * 3600


def snapstart_costs(
    memory_mb: int, cold_cpu_ms: float, restored_cpu_ms: float, prices: Prices = PRICES
) -> dict[str, float]:
    """What SnapStart costs one function, beside the init time it saves (modelled from measured CPU times)."""
    gb = memory_mb / 1024
    share = min(1.0, memory_mb / LAMBDA_MB_PER_VCPU)
    cold_ms, restored_ms = cold_cpu_ms / share, restored_cpu_ms / share
    return {
        "cache_usd_per_month": round(gb * MONTH_SECONDS * prices.snapstart_cache_gb_second, 4),
        "restore_usd_per_million_starts": round(gb * prices.snapstart_restore_gb * 1e6, 2),
        "start_ms_at_memory": round(cold_ms, 1),
        "start_ms_after_restore_at_memory": round(restored_ms, 1),
        "start_duration_usd_per_million_starts": round(cold_ms / 1000 * gb * prices.lambda_gb_second_arm * 1e6, 2),
        "after_restore_duration_usd_per_million_starts": round(
            restored_ms / 1000 * gb * prices.lambda_gb_second_arm * 1e6, 2
        ),
    }


@dataclass(frozen=True)
class Usage:
    """One job's usage, as measured."""

    write_units: float
    read_units: float
    sqs_requests: float
    lambda_invocations: float
    lambda_gb_seconds: float
    log_bytes: float

    def usd_per_million(self, prices: Prices = PRICES) -> dict[str, float]:
        """Dollars per million jobs by line item; `total` is DynamoDB + SQS + Lambda, `total_with_logs` adds logs."""
        items = {
            "dynamodb_writes": self.write_units * prices.dynamodb_write_unit,
            "dynamodb_reads": self.read_units * prices.dynamodb_read_unit,
            "sqs": self.sqs_requests * prices.sqs_request,
            "lambda_requests": self.lambda_invocations * prices.lambda_request,
            "lambda_duration": self.lambda_gb_seconds * prices.lambda_gb_second_arm,
            "logs": self.log_bytes / 1024**3 * prices.logs_ingestion_gb,
        }
        per_million = {name: value * 1e6 for name, value in items.items()}
        per_million["total"] = sum(value for name, value in per_million.items() if name != "logs")
        per_million["total_with_logs"] = per_million["total"] + per_million["logs"]
        return per_million
