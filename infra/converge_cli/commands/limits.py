"""`converge limits`: the rate limits' keys that jobs wait on, pause a key or release it; the concurrency caps' keys
with the operations running under them; the debounced keys with a burst waiting (docs/flow-control.md)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from converge.flow.limits import RateLimits
from converge.model.clock import iso
from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.options import Endpoint, Json, Profile, Region, Stack, print_json, target
from converge_cli.support.output import Column, records, say, stdout, styled

limits_app = typer.Typer(
    help="Rate limits: the keys jobs wait on; pause or release a key. Concurrency caps: what runs per key. Debounce:"
    " the bursts waiting.",
    no_args_is_help=True,
)
Key = Annotated[str | None, typer.Option("--key", help="The key (a payload field's value); omitted: the shared key.")]


def _limits(endpoint_url: str | None, stack: str, region: str | None, profile: str | None) -> RateLimits:
    deployment = target(endpoint_url, stack, region, profile)
    deployment.registry  # noqa: B018 - the limiters are the catalogue's: refuse now if there is none
    limits = deployment.converge.rate_limits
    if limits is None:
        raise UsageError("the catalogue declares no rate limits (no binding names a Limiter)")
    return limits


@limits_app.command("list")
@fails_cleanly
def list_limits(
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Every limiter with its pace, and its keys that jobs wait on now (one Query per limiter, no scan)."""
    limits = _limits(endpoint_url, stack, region, profile)
    waiting = limits.waiting()
    rows: list[dict[str, Any]] = [
        {
            "limiter": limiter.name,
            "pace": limiter.describe(),
            "description": limiter.description,
            "waiting": [
                {"key": w.key, "queued": w.queued, "next_start": iso(w.next_start)}
                for w in waiting
                if w.limiter.name == limiter.name
            ],
        }
        for limiter in limits.limiters.values()
    ]
    if as_json:
        print_json(rows)
        return
    records(
        stdout(),
        ["limiter", "pace", "key", Column("queued", "right"), "next start"],
        [
            [row["limiter"], row["pace"], entry["key"], str(entry["queued"]), entry["next_start"]]
            for row in rows
            for entry in (row["waiting"] or [{"key": "-", "queued": 0, "next_start": "now"}])
        ],
    )


@limits_app.command("pause")
@fails_cleanly
def pause_key(
    limiter: Annotated[str, typer.Argument(help="The limiter's name.")],
    seconds: Annotated[float, typer.Option("--seconds", min=1, max=366 * 86400, help="How long no job of it starts.")],
    key: Key = None,
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Pause a key: no job of it starts for that long (jobs held already keep their slots)."""
    until = _limits(endpoint_url, stack, region, profile).pause(limiter, key, seconds)
    if as_json:
        print_json({"limiter": limiter, "key": key or "*", "paused_until": iso(until)})
        return
    say(stdout(), styled(limiter, "bold"), f" ({key or 'shared key'}): paused until {iso(until)}")


@limits_app.command("release")
@fails_cleanly
def release_key(
    limiter: Annotated[str, typer.Argument(help="The limiter's name.")],
    key: Key = None,
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Release a key: its pace is forgotten, the next job starts at once (jobs held already keep their slots)."""
    released = _limits(endpoint_url, stack, region, profile).release(limiter, key)
    if as_json:
        print_json({"limiter": limiter, "key": key or "*", "released": released})
        return
    said = "released: the next job starts at once" if released else "had no pace to release"
    say(stdout(), styled(limiter, "bold"), f" ({key or 'shared key'}): {said}")


@limits_app.command("running")
@fails_cleanly
def running_keys(
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Every concurrency cap's keys with operations running now, and when the earliest slot lapses (one Query per
    cap, no scan). Jobs waiting for a slot are listed under SCHEDULED (converge ops list --state SCHEDULED)."""
    deployment = target(endpoint_url, stack, region, profile)
    deployment.registry  # noqa: B018 - the caps are the catalogue's: refuse now if there is none
    caps = deployment.converge.concurrency_caps
    if caps is None:
        raise UsageError("the catalogue declares no concurrency caps (no binding names a Concurrency)")
    running = caps.running()
    rows: list[dict[str, Any]] = [
        {
            "cap": cap.name,
            "limit": cap.describe(),
            "description": cap.description,
            "running": [
                {
                    "key": r.key,
                    "operations": list(r.running),
                    "full": r.full,
                    "next_free": iso(r.next_free),
                }
                for r in running
                if r.cap.name == cap.name
            ],
        }
        for cap in caps.caps.values()
    ]
    if as_json:
        print_json(rows)
        return
    records(
        stdout(),
        ["cap", "limit", "key", "running", "full", "earliest slot lapses"],
        [
            [
                row["cap"],
                row["limit"],
                entry["key"],
                ", ".join(entry["operations"]) or "-",
                "yes" if entry["full"] else "no",
                entry["next_free"],
            ]
            for row in rows
            for entry in (row["running"] or [{"key": "-", "operations": [], "full": False, "next_free": "-"}])
        ],
    )


@limits_app.command("bursts")
@fails_cleanly
def waiting_bursts(
    endpoint_url: Endpoint = None,
    stack: Stack = "converge",
    region: Region = None,
    profile: Profile = None,
    as_json: Json = False,
) -> None:
    """Every debounced job type's keys with a burst waiting: its newest request (the run, unless a newer one comes),
    when the burst began and when its run starts at the latest (one Query per debounced job type, no scan). Each
    request of a burst is listed under SCHEDULED too (converge ops list --state SCHEDULED)."""
    deployment = target(endpoint_url, stack, region, profile)
    deployment.registry  # noqa: B018 - the debounced job types are the catalogue's: refuse now if there is none
    debouncing = deployment.converge.debouncing
    if debouncing is None:
        raise UsageError("the catalogue debounces no job type (no binding names a Debounce)")
    rows = [
        {
            "job_type": burst.job_type,
            "debounce": burst.debounce.describe(),
            "key": burst.key,
            "newest": burst.newest,
            "since": iso(burst.first),
            "starts_by": iso(burst.starts),
        }
        for burst in debouncing.waiting()
    ]
    if as_json:
        print_json(rows)
        return
    if not rows:
        say(stdout(), "no burst waiting")
        return
    records(
        stdout(),
        ["job type", "debounce", "key", "newest request", "since", "starts by"],
        [[row["job_type"], row["debounce"], row["key"], row["newest"], row["since"], row["starts_by"]] for row in rows],
    )
