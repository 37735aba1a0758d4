"""Delta Lake helpers shared by every pipeline: tables, tagged commits, commit metrics."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from typing import Iterator

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


def table_location(path: str) -> str:
    """A URL stays as it is; a local path becomes absolute (Delta reads a relative one as a table name)."""
    if "://" in path or path.startswith("/"):
        return path
    return os.path.abspath(path)


def ensure_table(spark, path: str, schema, partition_by: tuple[str, ...] = (),
                 properties: dict[str, str] | None = None):
    """Create the Delta table at ``path`` if absent; return its ``DeltaTable``."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(schema)
        if partition_by:
            builder = builder.partitionedBy(*partition_by)
        for key, value in (properties or {}).items():
            builder = builder.property(key, value)
        builder.execute()
    return DeltaTable.forPath(spark, path)


@contextmanager
def commit_metadata(spark, metadata: dict) -> Iterator[None]:
    """Tag the Delta commits made inside the block with ``metadata`` (JSON ``userMetadata``)."""
    spark.conf.set(USER_METADATA_CONF, json.dumps(metadata, sort_keys=True))
    try:
        yield
    finally:
        spark.conf.unset(USER_METADATA_CONF)


def table_version(spark, path: str) -> int:
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, path).history(1).collect()[0]["version"]


def commit_since(spark, path: str, version_before: int) -> dict | None:
    """The commit a write just made, or None when Delta committed nothing (a no-op MERGE)."""
    commit = last_commit(spark, path)
    return commit if commit["version"] > version_before else None


def last_commit(spark, path: str) -> dict:
    """Version, operation, metrics and userMetadata of the table's newest commit."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).history(1).collect()[0]
    return {
        "version": row["version"],
        "operation": row["operation"],
        "metrics": {k: int(v) for k, v in (row["operationMetrics"] or {}).items() if v.isdigit()},
        "userMetadata": json.loads(row["userMetadata"]) if row["userMetadata"] else None,
    }
