"""Fixtures for template checks: template.yaml and converge's application it includes, as written and as the SAM
translator turns each into CloudFormation, seen as one (tests.conftest.merged_view: each section holds both's)."""

from __future__ import annotations

from typing import Any

import pytest

from localcloud.template import application_templates, parameter_values, transform_sam
from tests.conftest import TEMPLATE as DEFAULT_TEMPLATE
from tests.conftest import merged_view

APPLICATION = DEFAULT_TEMPLATE.parent / "shared" / "converge" / "application" / "template.yaml"
"""converge's own resources, as one SAM application inside the package."""


@pytest.fixture(scope="session")
def sam() -> dict[str, Any]:
    return merged_view(DEFAULT_TEMPLATE)


@pytest.fixture(scope="session")
def cfn(sam: dict[str, Any]) -> dict[str, Any]:
    """The transformed templates, merged; local CodeUris stand in as S3 locations, as after `sam package`."""
    merged: dict[str, Any] = {}
    for _, packaged, _ in reversed(application_templates(DEFAULT_TEMPLATE)):
        for resource in packaged["Resources"].values():
            properties = resource.get("Properties") or {}
            for key in ("CodeUri", "ContentUri"):
                if isinstance(properties.get(key), str):
                    properties[key] = f"s3://artifacts/{properties[key].strip('/')}.zip"
        for section, entries in transform_sam(packaged, parameter_values(packaged)).items():
            merged[section] = {**merged.get(section, {}), **entries} if isinstance(entries, dict) else entries
    return merged
