"""Fixtures for template checks: template.yaml as written and as the SAM translator turns it into CloudFormation."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.template import load_sam_template, parameter_values, transform_sam
from tests.conftest import TEMPLATE as DEFAULT_TEMPLATE


@pytest.fixture(scope="session")
def sam() -> dict[str, Any]:
    return load_sam_template(DEFAULT_TEMPLATE)


@pytest.fixture(scope="session")
def cfn(sam: dict[str, Any]) -> dict[str, Any]:
    """The transformed template; local CodeUris stand in as S3 locations, as after `sam package`."""
    packaged = load_sam_template(DEFAULT_TEMPLATE)
    for resource in packaged["Resources"].values():
        properties = resource.get("Properties") or {}
        for key in ("CodeUri", "ContentUri"):
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://artifacts/{properties[key].strip('/')}.zip"
    return transform_sam(packaged, parameter_values(packaged))
