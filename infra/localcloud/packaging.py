"""Upload local code directories to S3 and point the template at them, as `sam package` does.

The SAM translator only accepts S3 locations for CodeUri/ContentUri. The archives are real zips of
the directories (a layer's content under python/, as `sam build` lays it out), so moto records
realistic code sizes and hashes; the local cloud itself imports the source files in place.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path
from typing import Any

_SKIPPED_PARTS = {"__pycache__", ".pytest_cache", ".mypy_cache"}


def zip_directory(directory: Path, prefix: str = "") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            relative = path.relative_to(directory)
            if path.is_dir() or _SKIPPED_PARTS.intersection(relative.parts) or path.suffix == ".pyc":
                continue
            info = zipfile.ZipInfo(f"{prefix}{relative.as_posix()}", date_time=(1980, 1, 1, 0, 0, 0))
            archive.writestr(info, path.read_bytes())
    return buffer.getvalue()


def code_locations(sam: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """Logical id -> (property name, local path) for every local code directory in a SAM template."""
    global_code = (sam.get("Globals") or {}).get("Function", {}).get("CodeUri")
    found: dict[str, tuple[str, str]] = {}
    for logical_id, resource in (sam.get("Resources") or {}).items():
        properties = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::Serverless::Function":
            uri = properties.get("CodeUri", global_code)
            if isinstance(uri, str) and not uri.startswith("s3://") and "InlineCode" not in properties:
                found[logical_id] = ("CodeUri", uri)
        elif resource.get("Type") == "AWS::Serverless::LayerVersion":
            uri = properties.get("ContentUri")
            if isinstance(uri, str) and not uri.startswith("s3://"):
                found[logical_id] = ("ContentUri", uri)
    return found


def package_code(sam: dict[str, Any], base_dir: Path, s3: Any, bucket: str) -> dict[str, Path]:
    """Upload each local code directory once and rewrite the template in place.

    Returns logical id -> absolute local directory, which is where the local cloud loads code from.
    """
    uploaded: dict[tuple[str, str], str] = {}
    local_dirs: dict[str, Path] = {}
    for logical_id, (prop, uri) in code_locations(sam).items():
        directory = (base_dir / uri).resolve()
        is_layer = prop == "ContentUri"
        key = (str(directory), prop)
        if key not in uploaded:
            body = zip_directory(directory, prefix="python/" if is_layer else "")
            s3_key = f"{hashlib.sha256(body).hexdigest()}.zip"
            s3.put_object(Bucket=bucket, Key=s3_key, Body=body)
            uploaded[key] = f"s3://{bucket}/{s3_key}"
        sam["Resources"][logical_id]["Properties"][prop] = uploaded[key]
        local_dirs[logical_id] = directory
    return local_dirs
