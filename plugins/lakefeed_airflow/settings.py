"""Reading pipeline configuration and checkpoints from Airflow Variables (only inside tasks)."""

from __future__ import annotations

import logging

from lakefeed.checkpoint import BlobCheckpoint
from lakefeed.config import BlobPipelineConfig

log = logging.getLogger(__name__)

BLOB_CONFIG_VARIABLE = "lakefeed_blob_config"


def blob_config() -> BlobPipelineConfig:
    """Defaults pointing at the demo, overridden by the ``lakefeed_blob_config`` Variable (JSON)."""
    from airflow.sdk import Variable

    text = Variable.get(BLOB_CONFIG_VARIABLE, default=None)
    return BlobPipelineConfig.from_json(text, f"Variable {BLOB_CONFIG_VARIABLE}")


class CheckpointStore:
    """One Airflow Variable holding a versioned JSON checkpoint."""

    def __init__(self, variable: str):
        self.variable = variable

    def load(self) -> BlobCheckpoint:
        from airflow.sdk import Variable

        return BlobCheckpoint.from_json(Variable.get(self.variable, default=None), f"Variable {self.variable}")

    def save(self, checkpoint: BlobCheckpoint) -> None:
        from airflow.sdk import Variable

        Variable.set(self.variable, checkpoint.to_json(),
                     description="lakefeed blob change feed checkpoint (written by the DAG; do not edit by hand)")
        log.info("checkpoint %s saved: %s", self.variable, checkpoint.to_json())
