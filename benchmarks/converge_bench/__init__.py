"""What a job costs: converge measured side by side with a Powertools-only design on the local cloud.

`converge bench` runs both designs in one process, one after the other (each on a fresh moto), and
reports DynamoDB capacity units computed from item sizes, SQS requests, Lambda invocations, dollars
per million jobs, per-message framework overhead, throughput and cold start, as converge/baseline ratios.
"""
