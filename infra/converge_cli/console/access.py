"""Who may use the console: whoever holds the secret it printed when it started, as notebook servers do.

Loopback is not a boundary: any local process (another user's, a compromised tool) can reach
127.0.0.1. So each start makes a secret, prints it in the console's URL (`/?token=...`), and serves
nothing without it: the first visit with the token is exchanged for a session cookie (HttpOnly,
SameSite=Strict, named after this console's port and signed with a key made at this start), and
answered with a redirect to the same page without the token, so the token leaves the address bar
and never reaches a Referer or the browser's history of pages. A wrong token, a token anywhere but
the URL's query, or a cookie of another start (its signature no longer verifies) get the 403 page.

The stylesheet stays open: it is the same for every console and the 403 page uses it.
"""

from __future__ import annotations

import hmac
from urllib.parse import urlencode

from flask import Request, redirect, session
from werkzeug.wrappers import Response

TOKEN_PARAMETER = "token"
AUTHENTICATED = "authenticated"
OPEN_ENDPOINTS = frozenset({"static"})
EXCHANGE_METHODS = frozenset({"GET", "HEAD"})


class Locked(Exception):
    """The request carries neither this start's session nor its token (shown with status 403)."""


def same_secret(expected: str, given: str | None) -> bool:
    """Whether `given` is the secret, compared in constant time (the time does not tell how much matched)."""
    return bool(given) and hmac.compare_digest(expected.encode(), (given or "").encode())


def admit(request: Request, secret: str) -> Response | None:
    """None when the request may be served; a redirect that drops the token after a valid exchange.

    Raises Locked for anything else: no session, or a wrong token (a token on a POST is no session)."""
    if request.endpoint in OPEN_ENDPOINTS:
        return None
    given = request.args.get(TOKEN_PARAMETER)
    if given is not None and request.method in EXCHANGE_METHODS:
        if not same_secret(secret, given):
            raise Locked("that token is not this console's")
        # A fresh session: nothing planted before the exchange (a form token) outlives it.
        session.clear()
        session[AUTHENTICATED] = True
        return without_token(request)
    if session.get(AUTHENTICATED) is True:
        return None
    raise Locked("this console needs the key it printed when it started")


def without_token(request: Request) -> Response:
    """303 to the same page, its other query arguments kept, the token gone."""
    kept = [(name, value) for name, value in request.args.items(multi=True) if name != TOKEN_PARAMETER]
    response = redirect(request.path + (f"?{urlencode(kept)}" if kept else ""), code=303)
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
