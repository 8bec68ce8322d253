"""What keeps the console the operator's own: its Host and Origin, and a token on every form.

The console listens on loopback, but a page from any site the operator has open can still make
the browser send requests there: a form posted cross-site (CSRF), or a hostname of the attacker's
that resolves to 127.0.0.1 (DNS rebinding). So every request must name this server as its Host,
any Origin must be this server, and every POST must carry the session's own random token
(compared in constant time). The session cookie is signed with a key made when the server starts,
so a token from an earlier run means nothing.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

TOKEN_FIELD = "csrf_token"
SESSION_KEY = "csrf"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

SECURITY_HEADERS = {
    # Server-rendered pages with no script: nothing may run, frame it, or post it anywhere else.
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class Refused(Exception):
    """A request the console will not serve; the message says why (shown with status 403)."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Origins:
    """The `host:port` names this server answers to."""

    hosts: frozenset[str]

    @classmethod
    def serving(cls, host: str, port: int) -> Origins:
        names = {f"{host}:{port}"}
        if host in ("127.0.0.1", "localhost"):
            names |= {f"127.0.0.1:{port}", f"localhost:{port}"}
        return cls(frozenset(names))

    @classmethod
    def of(cls, hosts: Iterable[str]) -> Origins:
        return cls(frozenset(hosts))

    def check(self, method: str, host: str | None, origin: str | None, fetch_site: str | None) -> None:
        """Raise Refused for a foreign Host, a foreign Origin, or a cross-site unsafe request."""
        if (host or "").lower() not in self.hosts:
            raise Refused(f"Host {host!r} is not this console's ({', '.join(sorted(self.hosts))})")
        if origin is not None and origin.lower() not in {f"http://{name}" for name in self.hosts}:
            raise Refused(f"Origin {origin!r} is not this console")
        if method in UNSAFE_METHODS and fetch_site not in (None, "same-origin", "none"):
            raise Refused(f"a {fetch_site} {method} is not accepted")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def check_token(expected: str | None, given: str | None) -> None:
    """Raise Refused unless the form's token is the session's (compared in constant time)."""
    if not expected or not given or not hmac.compare_digest(expected.encode(), given.encode()):
        raise Refused("the form's token is missing or is not this session's; reload the page and try again")
