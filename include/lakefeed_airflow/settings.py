"""Pipeline configuration and checkpoints in Airflow Variables, read only inside tasks (never while a DAG
file is parsed): each feed's configuration Variable (``FeedSpec.config_variable``) and its pipelines'
checkpoint Variables. Checkpoints change only through a
:class:`~lakefeed.checkpoint_store.CheckpointStore` (compare-and-set).
"""

from __future__ import annotations

import logging
from typing import Any

from lakefeed.checkpoint_store import CheckpointKind, CheckpointStore
from lakefeed.feeds import FeedSpec
from lakefeed.pipeline import PipelineConfig

log = logging.getLogger(__name__)

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


def config_of(spec: FeedSpec, orm: bool = False) -> Any:
    """A feed's configuration: its Variable (JSON) over the defaults, which point at the demo.
    ``orm=True``: read through the ORM (the api-server's monitor and checks), not the Task SDK."""
    return spec.config(VariableCell(spec.config_variable, orm).get())


def checkpoint_store(pipeline: PipelineConfig, kind: CheckpointKind, orm: bool = False) -> CheckpointStore:
    """A pipeline's checkpoint, of type ``kind``, in the Variable its configuration names."""
    return CheckpointStore(VariableCell(pipeline.checkpoint_variable, orm), kind)
