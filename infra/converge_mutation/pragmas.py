"""Keep mutmut off calls that hold no rule (log lines), in the workspace's copy of the sources only.

Every line of a bare call statement whose callee matches a pattern (`logger.*`) gets mutmut's
`# pragma: no mutate` comment, so the text of a log line is never mutated and never costs a
survivor's full test run. The project's own sources are never touched.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import tokenize


def exclude_calls(source: str, patterns: tuple[str, ...]) -> tuple[str, int]:
    """The source with every line of the matching call statements marked; and how many statements."""
    if not patterns:
        return source, 0
    tree = ast.parse(source)
    spans = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and any(fnmatch.fnmatchcase(ast.unparse(node.value.func), pattern) for pattern in patterns)
    ]
    inside_strings = _lines_ending_inside_a_string(source)
    lines = source.splitlines(keepends=True)
    for first, last in spans:
        for number in range(first, last + 1):
            line = lines[number - 1]
            body = line.rstrip("\r\n")
            if number in inside_strings or body.endswith("\\"):
                continue  # a comment cannot go there
            lines[number - 1] = f"{body}  # pragma: no mutate{line[len(body) :]}"
    return "".join(lines), len(spans)


def _lines_ending_inside_a_string(source: str) -> set[int]:
    """Lines whose end falls inside a multi-line string, where a comment would become string text."""
    inside: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.STRING or token.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            inside.update(range(token.start[0], token.end[0]))
    return inside
