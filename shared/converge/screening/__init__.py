"""Screening of untrusted input: size caps first, then linear checks (identifiers, heuristics)."""
