"""Metrics: a batch publishes each (outcome, job type) once, not once per message."""

from __future__ import annotations

import json

from converge.observability import batched_counts, count


def emf_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{") and '"_aws"' in line]


def test_counts_inside_a_batch_are_added_up_and_published_once_per_job_type(capsys):
    # Given a batch in which three messages of one type and one of another succeed
    with batched_counts():
        for _ in range(3):
            count("succeeded", "mail.notice.v1")
        count("succeeded", "files.copy.v1")
        # Then nothing is published while the batch runs
        assert emf_lines(capsys.readouterr().out) == []
    # And at its end, one metric set per job type, carrying the sum
    published = {line["job_type"]: line["succeeded"] for line in emf_lines(capsys.readouterr().out)}
    assert published == {"mail.notice.v1": [3.0], "files.copy.v1": [1.0]}


def test_outside_a_batch_a_count_is_published_at_once(capsys):
    count("unknown", "money.credit.v1")
    [line] = emf_lines(capsys.readouterr().out)
    assert line["unknown"] == [1.0]
    assert line["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["job_type"]]
