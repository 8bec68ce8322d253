"""`converge link`: the project's link to converge's application, in the converge package it has installed.

A team's template includes converge as one `AWS::Serverless::Application` whose `Location` is
`.converge/application/template.yaml`. `.converge/application` is a symbolic link to the `application`
directory of the installed converge package (its SAM template and its functions' code roots): `converge init`
makes it, and `converge link` makes it again where it is missing or stale (a fresh clone, a new virtual
environment). Nothing of converge is copied into the project, so upgrading converge is the version pinned in
`shared/requirements.txt`, a reinstall, and `sam build`; `sam build`, `sam deploy` and the local cloud read the
application through the link. `.converge/` is in the project's .gitignore.
"""

from __future__ import annotations

from pathlib import Path

from converge_cli.support.errors import UsageError, fails_cleanly
from converge_cli.support.output import say, stdout, styled

LINK = Path(".converge") / "application"
"""Where a project's template finds converge's application, relative to the template."""


def application_dir() -> Path:
    """converge's application in the installed package: its template.yaml and functions/<name>/app.py."""
    import converge

    return Path(converge.__file__).resolve().parent / "application"


def link(project_root: Path) -> Path:
    """Point `<project>/.converge/application` at the installed package's application (made again if present)."""
    target = project_root / LINK
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink():
        target.unlink()
    elif target.exists():
        raise UsageError(f"{target} exists and is not a link: move it away, then run `converge link` again")
    target.symlink_to(application_dir(), target_is_directory=True)
    return target


@fails_cleanly
def link_command() -> None:
    """Link the project to converge's application in the installed package (.converge/application)."""
    from localcloud.project import current

    made = link(current().root)
    say(stdout(), styled("linked", "bold green"), f" {made} -> {made.resolve()}")
