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

    def to_json(self) -> dict[str, float | str]:
        return {"as_of": PRICES_AS_OF, "region": "us-east-1", **asdict(self)}


PRICES = Prices()


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
