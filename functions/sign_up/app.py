"""Sign-up: the new user's row and their verification e-mail's job, in one transaction (catalogue.producers).

Invoked by the sign-up service with {"user_id", "email", "display_name"}: parse, delegate, return. A repeated
sign-up writes nothing twice and says so ("created": false)."""

from typing import Any

from catalogue.producers import Producers, SignUp
from converge import Converge, catalogue_environment

converge = Converge.from_env()  # this function's converge: the jobs table and catalogue its environment names
producers = Producers(converge, catalogue_environment()["APP_TABLE"])


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return producers.sign_up(SignUp.model_validate(event))
