"""Sign-up: the new user's row and their greeting's job, written in one transaction (a producer of this project).

Invoked with {"user_id": "u-1"} (by another service, or behind an API route of your own): parse, delegate, return.
A client's retry of the same sign-up writes nothing twice.
"""

from typing import Any

from converge import Converge
from {{catalogue}}.users import SignUp, sign_up

converge = Converge.from_env()  # this function's converge: the jobs table and catalogue its environment names


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    request = SignUp.model_validate(event)
    return {"user_id": request.user_id, "created": sign_up(converge, request)}
