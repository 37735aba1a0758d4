"""Pipeline configuration and checkpoints in Airflow Variables (read only inside tasks, or while rendering
their templates).

The DAGs hand configuration to their sensors and operators as templated
constructor arguments, rendered from the config Variables through the
``lakefeed`` template macro (``{{ lakefeed.blob.feed_root }}``); the task logic
reads the config itself. Checkpoints change only through a
:class:`~lakefeed.checkpoint_store.CheckpointStore` (locked compare-and-set).
"""

from __future__ import annotations

import json
import logging

from lakefeed.checkpoint_store import CheckpointKind, CheckpointStore
from lakefeed.config import BlobPipelineConfig, CdfConfig, CrdbConfig
from lakefeed.pipeline import PipelineConfig

log = logging.getLogger(__name__)

BLOB_CONFIG_VARIABLE = "lakefeed_blob_config"
CDF_CONFIG_VARIABLE = "lakefeed_cdf_config"
CRDB_CONFIG_VARIABLE = "lakefeed_crdb_config"
CHECKPOINT_DESCRIPTION = "lakefeed checkpoint (written by the DAG; do not edit by hand)"


class VariableCell:
    """An Airflow Variable as a text cell: through the Task SDK inside a task, or through the ORM in
    processes that own the metadata database (the CLI, tests)."""

    def __init__(self, name: str, orm: bool = False):
        self.name = name
        self.orm = orm

    def get(self) -> str | None:
        if self.orm:
            from airflow.models import Variable as OrmVariable

            return OrmVariable.get(self.name, default_var=None)
        from airflow.sdk import Variable

        return Variable.get(self.name, default=None)

    def set(self, text: str) -> None:
        if self.orm:
            from airflow.models import Variable as OrmVariable

            OrmVariable.set(self.name, text, description=CHECKPOINT_DESCRIPTION)
            return
        from airflow.sdk import Variable

        Variable.set(self.name, text, description=CHECKPOINT_DESCRIPTION)


def _variable(name: str, orm: bool) -> str | None:
    return VariableCell(name, orm).get()


# ``orm=True``: read the Variable through the ORM (the api-server's monitor), not the Task SDK.


def blob_config(orm: bool = False) -> BlobPipelineConfig:
    """Defaults pointing at the demo, overridden by the ``lakefeed_blob_config`` Variable (JSON)."""
    return BlobPipelineConfig.from_json(_variable(BLOB_CONFIG_VARIABLE, orm), f"Variable {BLOB_CONFIG_VARIABLE}")


def cdf_config(orm: bool = False) -> CdfConfig:
    """The demo pipeline by default, or the pipelines of the ``lakefeed_cdf_config`` Variable (JSON)."""
    return CdfConfig.from_json(_variable(CDF_CONFIG_VARIABLE, orm), f"Variable {CDF_CONFIG_VARIABLE}")


def crdb_config(orm: bool = False) -> CrdbConfig:
    """The demo sink by default, or the ``lakefeed_crdb_config`` Variable (JSON)."""
    return CrdbConfig.from_json(_variable(CRDB_CONFIG_VARIABLE, orm), f"Variable {CRDB_CONFIG_VARIABLE}")


def checkpoint_store(pipeline: PipelineConfig, kind: CheckpointKind, orm: bool = False) -> CheckpointStore:
    """A pipeline's checkpoint, of type ``kind``, in the Variable its configuration names."""
    return CheckpointStore(VariableCell(pipeline.checkpoint_variable, orm), kind)


class ConfigMacros:
    """The ``lakefeed`` template macro: ``{{ lakefeed.blob.feed_root }}``, ``{{ lakefeed.cdf_sources() }}``.
    Each use reads the config Variable when the template renders (at task run time, never at parse)."""

    @property
    def blob(self) -> BlobPipelineConfig:
        return blob_config()

    @property
    def cdf(self) -> CdfConfig:
        return cdf_config()

    @property
    def crdb(self) -> CrdbConfig:
        return crdb_config()

    def cdf_sources(self, pipeline: str | None = None) -> str:
        """JSON of the sources the CDF sensor watches (all pipelines, or the named one)."""
        config = cdf_config()
        return json.dumps(
            [
                {
                    "name": p.name,
                    "source_table": p.source_table,
                    "target_table": p.target_table,
                    "checkpoint_variable": p.checkpoint_variable,
                    "keys": p.keys,
                    "columns": p.columns,
                    "wasb_conn_id": p.wasb_conn_id,
                }
                for p in config.pipelines
                if pipeline in (None, "", p.name)
            ]
        )


TEMPLATE_MACROS = {"lakefeed": ConfigMacros()}
