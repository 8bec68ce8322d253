"""The `converge` command's commands: one module a command (`converge X` in commands/X.py), its parts beside it."""
