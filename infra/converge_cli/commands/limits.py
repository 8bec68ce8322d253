"""`converge limits`: the rate limits' keys that jobs wait on and the concurrency caps' keys with their holders and
waiters; the debounced keys with a burst waiting; an operator pauses a key or releases it, or frees a cap's slot
left behind (docs/flow-control.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated, Any

import typer

from converge.flow.concurrency import ConcurrencyCaps
from converge.flow.limits import RateLimits
from converge.model.clock import iso
from converge.runtime import Converge
from converge_cli.support.errors import ExitCode, UsageError, fails_cleanly
from converge_cli.support.operators import actor
from converge_cli.support.options import Json, on_deployment, print_json
from converge_cli.support.output import Column, records, say, stderr, stdout, styled
from converge_cli.support.target import Target

limits_app = typer.Typer(
    help="Flow control: the rate limits' keys jobs wait on, the concurrency caps' keys with what runs and waits; "
    "the debounced keys with a burst waiting; pause or release a key, or free a cap's slot left behind.",
    no_args_is_help=True,
)
Key = Annotated[str | None, typer.Option("--key", help="The key (a payload field's value); omitted: the shared key.")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
Name = Annotated[str, typer.Argument(help="A limiter's or a concurrency cap's name.")]


def _converge(deployment: Target) -> Converge:
    deployment.registry  # noqa: B018 - the limiters and caps are the catalogue's: refuse now if there is none
    return deployment.converge


def _limits(converge: Converge) -> RateLimits:
    if converge.rate_limits is None:
        raise UsageError("the catalogue declares no rate limits (no binding names a Limiter)")
    return converge.rate_limits


def _caps(converge: Converge) -> ConcurrencyCaps:
    if converge.concurrency_caps is None:
        raise UsageError("the catalogue declares no concurrency caps (no binding names a Concurrency)")
    return converge.concurrency_caps


def _named(converge: Converge, name: str) -> str:
    """Whether a name is a limiter's ("limiter") or a cap's ("cap"); refused when it is neither, or both."""
    limiters = converge.rate_limits.limiters if converge.rate_limits is not None else {}
    caps = converge.concurrency_caps.caps if converge.concurrency_caps is not None else {}
    if name in limiters and name in caps:
        raise UsageError(f"{name!r} names both a limiter and a concurrency cap; rename one in the catalogue")
    if name in limiters:
        return "limiter"
    if name in caps:
        return "cap"
    known = ", ".join(sorted({*limiters, *caps})) or "none declared"
    raise UsageError(f"no limiter or concurrency cap named {name!r} (known: {known})")


def _show(
    rows: list[dict[str, Any]],
    nested: str,
    columns: Sequence[Column | str],
    cells: Callable[[dict[str, Any], dict[str, Any] | None], list[str]],
    as_json: bool,
) -> None:
    """The rows as JSON, or as a table of one line per nested entry (one line of dashes for a row with none)."""
    if as_json:
        print_json(rows)
        return
    records(stdout(), columns, [cells(row, entry) for row in rows for entry in (row[nested] or [None])])


def _confirmed(question: str, yes: bool) -> None:
    """Ask on stderr (so --json output stays clean) unless --yes; declined: nothing changes, exit 1."""
    if yes:
        return
    if not typer.confirm(question, err=True):
        say(stderr(), "nothing changed")
        raise typer.Exit(ExitCode.FAILED)


@limits_app.command("list")
@fails_cleanly
@on_deployment
def list_limits(
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Every limiter with its pace, and its keys that jobs wait on now (one Query per limiter, no scan)."""
    limits = _limits(_converge(deployment))
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
    _show(
        rows,
        "waiting",
        ["limiter", "pace", "key", Column("queued", "right"), "next start"],
        lambda row, entry: [
            row["limiter"],
            row["pace"],
            *((entry["key"], str(entry["queued"]), entry["next_start"]) if entry else ("-", "0", "now")),
        ],
        as_json,
    )


@limits_app.command("running")
@fails_cleanly
@on_deployment
def running_keys(
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Every concurrency cap's keys with operations running now, the request waiting as the newest (replace mode),
    who paused a key, and when the earliest slot lapses (one Query per cap, no scan). Jobs waiting for a slot are
    listed under SCHEDULED (converge ops list --state SCHEDULED)."""
    caps = _caps(_converge(deployment))
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
                    "newest_waiting": r.newest,
                    "paused_by": r.paused_by,
                }
                for r in running
                if r.cap.name == cap.name
            ],
        }
        for cap in caps.caps.values()
    ]
    _show(
        rows,
        "running",
        ["cap", "limit", "key", "running", "full", "earliest slot lapses", "paused by"],
        lambda row, entry: [
            row["cap"],
            row["limit"],
            *(
                (
                    entry["key"],
                    ", ".join(entry["operations"]) or "-",
                    "yes" if entry["full"] else "no",
                    entry["next_free"],
                    entry["paused_by"] or "-",
                )
                if entry
                else ("-", "-", "no", "-", "-")
            ),
        ],
        as_json,
    )


@limits_app.command("pause")
@fails_cleanly
@on_deployment
def pause_key(
    name: Name,
    seconds: Annotated[
        float | None,
        typer.Option("--seconds", min=1, max=366 * 86400, help="A limiter's key: how long no job of it starts."),
    ] = None,
    key: Key = None,
    yes: Yes = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Pause a key: no job of it starts. A limiter's key for --seconds (jobs held already keep their slots); a
    concurrency cap's key until released (its jobs wait SCHEDULED, listed; those running run on). Asks first
    unless --yes; the operator (CONVERGE_ACTOR, else cli:<login>) is recorded."""
    converge = _converge(deployment)
    kind, shown, who = _named(converge, name), key or "shared key", actor()
    if kind == "limiter" and seconds is None:
        raise UsageError(f"{name} is a limiter: say how long its key pauses (--seconds)")
    if kind == "cap" and seconds is not None:
        raise UsageError(f"{name} is a concurrency cap: its key pauses until released (no --seconds)")
    _confirmed(f"pause {name} ({shown}): none of its jobs starts{'' if seconds else ' until released'}?", yes)
    if kind == "limiter":
        until = _limits(converge).pause(name, key, seconds or 0, operator=who)
        result: dict[str, Any] = {"limiter": name, "key": key or "*", "paused_until": iso(until), "by": who}
        said = f"paused until {iso(until)} by {who}"
    else:
        paused = _caps(converge).pause(name, key, who)
        result = {"cap": name, "key": key or "*", "paused": paused, "by": who}
        said = f"paused by {who}: none of its jobs starts until released" if paused else "was paused already"
    _said(name, shown, said, result, as_json)


@limits_app.command("release")
@fails_cleanly
@on_deployment
def release_key(
    name: Name,
    key: Key = None,
    slot: Annotated[
        str | None,
        typer.Option("--slot", help="A cap's key: free this operation's slot (its holder gone) instead."),
    ] = None,
    yes: Yes = False,
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Release a key: a limiter's pace is forgotten (the next job starts at once); a cap's paused key starts its
    jobs again, those held on it woken now. With --slot, free a cap's slot its holder left behind (an operation
    still running keeps running, and another may then start beside it). Asks first unless --yes; the operator is
    recorded."""
    converge = _converge(deployment)
    kind, shown, who = _named(converge, name), key or "shared key", actor()
    if slot is not None and kind != "cap":
        raise UsageError(f"{name} is a limiter: --slot frees a concurrency cap's slot")
    if slot is not None:
        say(stderr(), _holder(converge, slot))
        _confirmed(f"free {slot}'s slot of {name} ({shown}), as if it had ended?", yes)
        freed = _caps(converge).release_slot(name, key, slot, who)
        result: dict[str, Any] = {"cap": name, "key": key or "*", "slot": slot, "released": freed, "by": who}
        _said(name, shown, f"{slot}'s slot freed by {who}" if freed else f"{slot} holds no slot", result, as_json)
        return
    _confirmed(f"release {name} ({shown})?", yes)
    if kind == "limiter":
        released = _limits(converge).release(name, key, operator=who)
        result = {"limiter": name, "key": key or "*", "released": released, "by": who}
        said = f"released by {who}: the next job starts at once" if released else "had no pace to release"
    else:
        freed = _caps(converge).resume(name, key, who)
        result = {"cap": name, "key": key or "*", "released": freed.released, "by": who}
        result |= {"woken": list(freed.woken), "unsent": list(freed.unsent), "missed": list(freed.missed)}
        said = f"released by {who}" if freed.released else "was not paused"
        said += f": {len(freed.woken)} held job(s) woken now"
        if freed.unsent:
            said += f"; {len(freed.unsent)} could not be sent, listed under STUCK for the reconciler"
        if freed.missed:
            said += f"; {len(freed.missed)} could not be woken (they start as they next try; release again)"
    _said(name, shown, said, result, as_json)


def _holder(converge: Converge, operation_id: str) -> str:
    """What the slot's holder is now, read from its record: whether freeing its slot lets a job start beside it."""
    operation = converge.operations.get(operation_id)
    if operation is None:
        return f"{operation_id}: no such operation (its slot is left from one deleted, or mistyped)"
    record = operation.state_record
    lease = record.lease_until if record is not None else None
    if operation.state.value == "IN_PROGRESS" and lease is not None and lease > converge.clock.now():
        return (
            f"{operation_id} is IN_PROGRESS, its lease live until {iso(lease)}: it may still be running, and "
            "another job of the key may start beside it"
        )
    return f"{operation_id} is {operation.state.value}: its slot is left behind"


def _said(name: str, shown: str, said: str, result: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    say(stdout(), styled(name, "bold"), f" ({shown}): {said}")


@limits_app.command("bursts")
@fails_cleanly
@on_deployment
def waiting_bursts(
    *,
    deployment: Target,
    as_json: Json = False,
) -> None:
    """Every debounced job type's keys with a burst waiting: its newest request (the run, unless a newer one comes),
    when the burst began and when its run starts at the latest (one Query per debounced job type, no scan). Each
    request of a burst is listed under SCHEDULED too (converge ops list --state SCHEDULED)."""
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
