"""Object storage: a small port, its S3 adapter, and content-addressed keys."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

from botocore.exceptions import ClientError

from catalogue.clients import LazyClient
from converge import error_code

_MISSING = frozenset({"NoSuchKey", "404", "NotFound"})


class ObjectMissing(LookupError):
    """The object does not exist."""


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    content_type: str


class ObjectStore(Protocol):
    def head(self, key: str) -> ObjectInfo | None: ...

    def get(self, key: str) -> bytes: ...

    def put(self, key: str, data: bytes, content_type: str, operation_id: str | None = None) -> None: ...


def content_key(prefix: str, data: bytes, suffix: str = "") -> str:
    """`<prefix>/<sha256 of data><suffix>`: the same content always lands on the same key."""
    return f"{prefix.rstrip('/')}/{hashlib.sha256(data).hexdigest()}{suffix}"


class S3ObjectStore:
    """ObjectStore over one S3 bucket (server-side encryption is the bucket's default)."""

    def __init__(self, bucket: str, s3_client: Any = None) -> None:
        self.bucket = bucket
        self._s3 = LazyClient("s3", s3_client)

    def head(self, key: str) -> ObjectInfo | None:
        try:
            response = self._s3().head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if error_code(exc) in _MISSING:
                return None
            raise
        return ObjectInfo(key, int(response["ContentLength"]), response.get("ContentType", "binary/octet-stream"))

    def get(self, key: str) -> bytes:
        try:
            response = self._s3().get_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if error_code(exc) in _MISSING:
                raise ObjectMissing(f"s3://{self.bucket}/{key} does not exist") from exc
            raise
        body: bytes = response["Body"].read()
        return body

    def put(self, key: str, data: bytes, content_type: str, operation_id: str | None = None) -> None:
        # The writer's operation id travels as object metadata, so an object traces to its operation.
        metadata = {"operation-id": operation_id} if operation_id else {}
        self._s3().put_object(Bucket=self.bucket, Key=key, Body=data, ContentType=content_type, Metadata=metadata)
