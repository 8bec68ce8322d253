"""Partner credit: the credit's request row and the credit job, in one transaction (catalogue.producers).

Invoked by the benefits team's service with {"request_id", "partner_id", "amount_cents", "benefit"}: parse,
delegate, return. The request id names the operation, so a repeated request credits nothing twice."""

from typing import Any

from catalogue.producers import PartnerCredit, Producers
from converge import Converge, catalogue_environment

converge = Converge.from_env()  # this function's converge: the jobs table and catalogue its environment names
producers = Producers(converge, catalogue_environment()["APP_TABLE"])


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return producers.request_credit(PartnerCredit.model_validate(event))
