"""Pipeline configuration and checkpoints in Airflow Variables (read only inside tasks)."""

from __future__ import annotations

import logging

from lakefeed.checkpoint import BlobCheckpoint, CdfCheckpoint
from lakefeed.config import BlobPipelineConfig, CdfConfig, CdfPipeline

log = logging.getLogger(__name__)

BLOB_CONFIG_VARIABLE = "lakefeed_blob_config"
CDF_CONFIG_VARIABLE = "lakefeed_cdf_config"


def _variable(name: str) -> str | None:
    from airflow.sdk import Variable

    return Variable.get(name, default=None)


def blob_config() -> BlobPipelineConfig:
    """Defaults pointing at the demo, overridden by the ``lakefeed_blob_config`` Variable (JSON)."""
    return BlobPipelineConfig.from_json(_variable(BLOB_CONFIG_VARIABLE), f"Variable {BLOB_CONFIG_VARIABLE}")


def cdf_config() -> CdfConfig:
    """The demo pipeline by default, or the pipelines of the ``lakefeed_cdf_config`` Variable (JSON)."""
    return CdfConfig.from_json(_variable(CDF_CONFIG_VARIABLE), f"Variable {CDF_CONFIG_VARIABLE}")


class CheckpointStore:
    """One Airflow Variable holding a versioned JSON checkpoint (of ``kind``)."""

    def __init__(self, variable: str, kind=BlobCheckpoint):
        self.variable = variable
        self.kind = kind

    def load(self):
        return self.kind.from_json(_variable(self.variable), f"Variable {self.variable}")

    def save(self, checkpoint) -> None:
        from airflow.sdk import Variable

        Variable.set(self.variable, checkpoint.to_json(),
                     description="lakefeed checkpoint (written by the DAG; do not edit by hand)")
        log.info("checkpoint %s saved: %s", self.variable, checkpoint.to_json())


def cdf_checkpoint_store(pipeline: CdfPipeline) -> CheckpointStore:
    return CheckpointStore(pipeline.checkpoint_variable, CdfCheckpoint)
