"""converge's own AWS clients: botocore's, a fixed User-Agent, and SSM's model cut to the calls converge makes."""

from __future__ import annotations

import boto3
import pytest

from converge.runtime.clients import Clients, user_agent
from converge.runtime.lean_models import LEAN_MODELS, OPERATIONS, lean_models
from converge.runtime.root import Converge
from converge.runtime.settings import Settings


def test_the_shipped_lean_models_are_botocores_own_cut_to_converges_calls():
    # Given the models the package ships, and the same cut made now from the installed botocore's
    shipped = {path: path.read_text() for path in LEAN_MODELS.glob("*/*/service-2.json")}
    # Then they are the same files (after a botocore upgrade: `python -m converge.runtime.lean_models` writes them)
    assert shipped == lean_models()
    assert {path.relative_to(LEAN_MODELS).parts[0] for path in shipped} == set(OPERATIONS)


def test_the_runtimes_ssm_client_has_the_operations_converge_calls_and_they_work(aws):
    # Given a runtime's clients (the lean models first) and a plain Clients (botocore's models)
    lean = Clients(region="us-east-1", models=LEAN_MODELS).ssm
    full = Clients(region="us-east-1").ssm
    # Then the runtime's SSM client has exactly the operations converge calls, the other all of SSM's
    assert sorted(lean.meta.service_model.operation_names) == sorted(OPERATIONS["ssm"])
    assert len(full.meta.service_model.operation_names) > 100
    # And they work as any client's: a toggle written and read back, a missing one refused by its error code
    lean.put_parameter(Name="/converge/test/toggles/mail.x", Value="on", Type="String", Overwrite=True)
    assert lean.get_parameter(Name="/converge/test/toggles/mail.x")["Parameter"]["Value"] == "on"
    with pytest.raises(lean.exceptions.ParameterNotFound):
        lean.get_parameter(Name="/converge/test/toggles/missing")


def test_a_runtime_from_the_environment_makes_its_clients_with_the_lean_models(aws, monkeypatch):
    # Given a runtime built as a function builds it
    runtime = Converge(Settings(JOBS_TABLE="j", MARKERS_TABLE="m", STATE_TABLE="s"))
    # Then its SSM client is the lean one, and its other clients have botocore's whole model
    assert sorted(runtime.clients.ssm.meta.service_model.operation_names) == sorted(OPERATIONS["ssm"])
    assert "DescribeTable" in runtime.clients.dynamodb.meta.service_model.operation_names


def test_a_session_given_is_used_as_it_is():
    # Given a boto3 session handed in (a tool's or a test's) / Then its clients are its own, with botocore's models
    clients = Clients(session=boto3.session.Session(region_name="eu-west-1"), models=LEAN_MODELS)
    ssm = clients.ssm
    assert ssm.meta.region_name == "eu-west-1"
    assert len(ssm.meta.service_model.operation_names) > 100


def test_the_user_agent_names_converge_botocore_python_and_the_lambda_runtime():
    agent = user_agent({"AWS_EXECUTION_ENV": "AWS_Lambda_python3.13"})
    assert agent.startswith("converge Botocore/") and " Python/3." in agent
    assert agent.endswith(" exec-env/AWS_Lambda_python3.13")
    assert "exec-env" not in user_agent({})
    assert Clients(region="us-east-1").get("sqs").meta.config.user_agent == user_agent()


def test_the_loader_asks_about_the_service_a_client_is_for_and_refuses_an_unknown_one_as_botocore_does(monkeypatch):
    from botocore.exceptions import UnknownServiceError
    from botocore.loaders import Loader

    from converge.runtime.lean_models import ServiceLoader

    # Given converge's loader, watched for botocore's list of every service
    listed: list[str] = []
    real = Loader.list_available_services

    def every_service(self, type_name):
        listed.append(type_name)
        return real(self, type_name)

    monkeypatch.setattr(Loader, "list_available_services", every_service)
    loader = ServiceLoader(extra_search_paths=[str(LEAN_MODELS)])
    # When a service it has is loaded / Then its model is botocore's (or the lean one), and nothing else was listed
    assert loader.load_service_model("sqs", "service-2")["metadata"]["endpointPrefix"] == "sqs"
    assert sorted(loader.load_service_model("ssm", "service-2")["operations"]) == sorted(OPERATIONS["ssm"])
    assert listed == []
    # And an unknown service is refused as botocore refuses it, naming the services there are
    with pytest.raises(UnknownServiceError, match="dynamodb"):
        loader.load_service_model("no-such-service", "service-2")
    assert listed == ["service-2"]
    # And the list of every service is still botocore's, when asked for it
    assert "dynamodb" in loader.list_available_services("service-2")
