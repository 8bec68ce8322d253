"""Mutation testing of converge's rule modules: a mutmut run in a scratch workspace, and its report.

`make mutate` runs `python -m converge_mutation run`, then `python -m converge_mutation report`,
which writes docs/mutation.md. What is mutated, which tests drive it and which surviving mutants
are equivalent (with the reason) is one reviewed file, tests/mutation.toml.
"""
