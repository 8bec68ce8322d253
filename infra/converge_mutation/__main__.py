"""`python -m converge_mutation run [--only MODULE ...]`, `... recheck TEST ...` and `... report`."""

from __future__ import annotations

import argparse
import sys
from importlib import metadata

from converge_mutation import recheck, saved, workspace
from converge_mutation import report as reporting
from converge_mutation.scope import load


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="converge_mutation", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run mutmut over the rule modules (a fresh workspace unless --only)")
    run.add_argument("--only", nargs="+", default=[], metavar="MODULE", help="just these modules (dotted names)")
    run.add_argument(
        "--survivors",
        action="store_true",
        help="test again only what the last run left surviving or unchecked (after writing tests)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help=(
            "go on with a stopped run, or after a fix: only the mutants that have no result yet in the existing"
            " workspace (not reached, or of a function changed since)"
        ),
    )
    run.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    again = commands.add_parser(
        "recheck", help="run the named tests against the last run's survivors and record what they kill"
    )
    again.add_argument("tests", nargs="+", metavar="TEST", help="test files, relative to the project")
    again.add_argument("--only", nargs="+", default=[], metavar="MODULE", help="survivors of these modules only")
    again.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2)")
    again.add_argument(
        "--unchecked", action="store_true", help="also the mutants the last run did not reach (only kills count)"
    )
    commands.add_parser("report", help="write docs/mutation.md from the last run; exit 1 below the target")
    args = parser.parse_args(argv)

    scope = load()
    for module in scope.missing:
        print(f"warning: {module} is listed in tests/mutation.toml but has no file (renamed?)", file=sys.stderr)
    for module in scope.unclassified:
        print(f"warning: {module} is in neither 'mutate' nor 'skip' of tests/mutation.toml (new?)", file=sys.stderr)

    if args.command == "run":
        unknown = [module for module in args.only if module not in scope.modules]
        if unknown:
            parser.error(f"not in scope: {', '.join(unknown)} (in scope: {', '.join(scope.modules)})")
        for flag, given in (("--survivors", args.survivors), ("--resume", args.resume)):
            if given and not workspace.MUTANTS.exists() and not saved.RESULTS.exists():
                parser.error(f"{flag} needs a previous run's workspace (.mutate/) or its kept results")
        if args.resume and (args.only or args.survivors):
            parser.error("--resume goes on with what the runs before left unchecked; it takes no --only or --survivors")
        record = workspace.run(scope, args.only, args.max_children, survivors=args.survivors, resume=args.resume)
        print(f"mutmut ran {', '.join(record.modules)} in {record.seconds:.0f} s (exit {record.exit_code})")
        return record.exit_code

    if args.command == "recheck":
        tried, killed, seconds = recheck.recheck(args.tests, args.only, args.max_children, args.unchecked)
        workspace.note_recheck(args.tests, tried, killed, seconds, args.max_children)
        print(f"{killed} of {tried} surviving mutants killed by {', '.join(args.tests)} in {seconds:.0f} s")
        return 0

    result = reporting.build(scope, workspace.MUTANTS, workspace.load_runs())
    reporting.REPORT.write_text(reporting.render(result))
    print(f"wrote {reporting.REPORT.relative_to(reporting.REPO_ROOT)}")
    if workspace.MUTANTS.exists():
        kept = saved.save(
            scope, workspace.MUTANTS, workspace.load_runs(), metadata.version("mutmut"), kills=workspace.KILL_LOG
        )
        print(
            f"wrote {saved.RESULTS.relative_to(reporting.REPO_ROOT)} ({kept} mutants' results, for RESUME=1 elsewhere)"
        )
    print(reporting.summary(result))
    if not result.passed:
        print(f"below the target of {scope.target:.0%} killed per module (or a listed module is missing)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
