"""The reference application's settings, read from the function's environment.

template.yaml passes them to converge's application as its CatalogueEnvironment, a JSON object that every
function gets, read with `converge.catalogue_environment()`; a variable set directly (a test, a tool) wins.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from converge import ConfigurationError, catalogue_environment


class CatalogueSettings(BaseModel):
    """Names of the reference application's resources. Each job's factory requires only what it uses."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")

    app_table: str | None = Field(default=None, alias="APP_TABLE")
    documents_bucket: str | None = Field(default=None, alias="DOCUMENTS_BUCKET")
    signing_secret_arn: str | None = Field(default=None, alias="SIGNING_SECRET_ARN")
    sender_email: str | None = Field(default=None, alias="SENDER_EMAIL")
    ledger_table: str | None = Field(default=None, alias="LEDGER_TABLE")
    region: str = Field(default="us-east-1", validation_alias=AliasChoices("AWS_REGION", "AWS_DEFAULT_REGION"))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> CatalogueSettings:
        return cls.model_validate(catalogue_environment(env))

    def require(self, name: str) -> str:
        """The named setting, or a ConfigurationError naming its environment variable."""
        value = getattr(self, name)
        if not value:
            alias = type(self).model_fields[name].alias or name.upper()
            raise ConfigurationError(f"the reference application needs {alias} in the environment")
        return str(value)
