"""A checkpoint cell in a file, for tests of the task logic that need no Airflow metadata database
(the Airflow Variable cell is exercised by the DAG tests and tests/integration/test_checkpoint_race.py)."""

from __future__ import annotations

import os
from pathlib import Path

from lakefeed.checkpoint_store import CheckpointStore


class FileCell:
    def __init__(self, path: Path, name: str = "cp"):
        self.path, self.name = Path(path), name

    def get(self) -> str | None:
        return self.path.read_text() if self.path.exists() else None

    def set(self, text: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(f".{os.getpid()}.partial")
        partial.write_text(text)
        partial.replace(self.path)


def file_store(folder: Path, kind, name: str = "cp") -> CheckpointStore:
    return CheckpointStore(FileCell(Path(folder) / f"{name}.json", name), kind)


_OUTPUTS: dict[int, tuple[object, object]] = {}


def job_outputs(planned):
    """What the spark-submit tasks of a planned run left in XCom (summaries, refusals), as the commit step
    pulls it; kept beside the plan (by identity: plans are frozen) for the unit tests."""
    from lakefeed.pipeline import JobOutputs

    return _OUTPUTS.setdefault(id(planned), (planned, JobOutputs()))[1]
