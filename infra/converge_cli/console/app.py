"""The console's web application: one Flask app over one deployment, guarded on every request.

Flask because it is well kept, needs no front-end build, renders Jinja templates with autoescape on
(every value from data is escaped), ships a test client, and is already installed with the local
cloud (moto's server runs on it). Pages are server-rendered HTML with inline SVG charts; no script.
"""

from __future__ import annotations

import secrets
from typing import Any

from flask import Flask, render_template, request, session

from converge.model.errors import ConvergeError, InvalidAction, OperationNotFound, UnknownJobType
from converge_cli.console import actions, pages
from converge_cli.console.access import AUTHENTICATED, Locked, admit
from converge_cli.console.guard import (
    SECURITY_HEADERS,
    SESSION_KEY,
    TOKEN_FIELD,
    UNSAFE_METHODS,
    Origins,
    Refused,
    check_token,
    new_token,
)
from converge_cli.support.errors import UsageError
from converge_cli.support.target import Target, TargetError
from localcloud.project import ProjectError


def create_app(
    deployment: Target, origins: Origins, actor: str, *, secret: str, cookie_name: str = "converge_console"
) -> Flask:
    """The console for `deployment`, answering only to `origins` and only to whoever holds `secret`;
    operator actions are taken as `actor`. `cookie_name` tells consoles on one host apart (cookies
    ignore ports)."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=secrets.token_bytes(32),  # per server run: sessions and tokens of an earlier run mean nothing
        SESSION_COOKIE_NAME=cookie_name,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Strict",
        SESSION_COOKIE_PATH="/",
        MAX_CONTENT_LENGTH=64 * 1024,  # forms are a reason and a few fields
    )
    app.jinja_env.autoescape = True  # every template, whatever its extension
    app.extensions["converge"] = {"deployment": deployment, "origins": origins, "actor": actor}

    @app.before_request
    def guard() -> Any:
        origins.check(
            request.method,
            request.headers.get("Host"),
            request.headers.get("Origin"),
            request.headers.get("Sec-Fetch-Site"),
        )
        exchanged = admit(request, secret)  # the console's key: its session, or the token it printed
        if exchanged is not None:
            return exchanged
        if request.method in UNSAFE_METHODS:
            check_token(session.get(SESSION_KEY), request.form.get(TOKEN_FIELD))
        return None

    @app.context_processor
    def form_token() -> dict[str, Any]:
        def csrf_token() -> str:
            if SESSION_KEY not in session:
                session[SESSION_KEY] = new_token()
            return str(session[SESSION_KEY])

        return {
            "csrf_token": csrf_token,
            "token_field": TOKEN_FIELD,
            "actor": actor,
            "signed_in": session.get(AUTHENTICATED) is True,  # a refusal shows no one what the console holds
        }

    @app.after_request
    def headers(response: Any) -> Any:
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)  # the token's exchange sends no Referer at all
        return response

    @app.errorhandler(Locked)
    def locked(exc: Locked) -> Any:
        return render_template("locked.html", title="locked", message=str(exc), origin=request.host_url), 403

    @app.errorhandler(Refused)
    def refused(exc: Refused) -> Any:
        return render_template("error.html", title="refused", message=str(exc)), 403

    @app.errorhandler(OperationNotFound)
    def not_found(exc: OperationNotFound) -> Any:
        return render_template("error.html", title="not found", message=str(exc)), 404

    @app.errorhandler(UsageError)
    @app.errorhandler(InvalidAction)
    @app.errorhandler(UnknownJobType)
    def bad_request(exc: Exception) -> Any:
        return render_template("error.html", title="bad request", message=str(exc)), 400

    @app.errorhandler(ConvergeError)
    def refused_by_converge(exc: ConvergeError) -> Any:
        return render_template("error.html", title="not done", message=str(exc)), 409

    @app.errorhandler(TargetError)
    def unreachable(exc: TargetError) -> Any:
        return render_template("error.html", title="deployment not found", message=str(exc)), 503

    @app.errorhandler(ProjectError)
    def no_project(exc: ProjectError) -> Any:  # no job catalogue found where the console was started
        return render_template("error.html", title="no job catalogue", message=str(exc)), 503

    app.register_blueprint(pages.blueprint)
    app.register_blueprint(actions.blueprint)
    return app
