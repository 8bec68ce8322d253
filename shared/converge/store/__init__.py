"""The store: the only code that talks to DynamoDB (the jobs, state and markers tables)."""
