"""What a job costs: converge measured side by side with two Powertools-only designs on the local cloud.

`converge bench` deploys the three designs side by side (converge, the bare Powertools baseline, and the
same-job baseline that also validates its messages and reads a kill switch) and runs them in interleaved
rounds; it reports DynamoDB capacity units computed from item sizes, SQS requests, Lambda invocations,
dollars per million jobs, per-message framework overhead, throughput and cold start as Lambda pays it, as
ratios (the median of the rounds, with their spread) and targets.
"""
