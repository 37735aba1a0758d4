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


def plan_one(hooks, config, checkpoint, params, run, storage=None):
    """A plan of a feed with one checkpoint (``hooks``: a :class:`lakefeed.pipeline.FeedHooks`), from the
    checkpoint as loaded."""
    from lakefeed.pipeline import LOCAL

    return hooks.plan_run(config, {hooks.name(config): checkpoint}, params, run, storage or LOCAL)


def commit_plan(hooks, stores, planned, outputs, run_id, announced_since=None):
    """The commit step of ``planned`` over ``stores`` (one store: a feed with one checkpoint; else by
    pipeline name); the run summary's document."""
    from lakefeed.documents import to_document
    from lakefeed.pipeline import nothing_announced

    if isinstance(stores, CheckpointStore):
        stores = {hooks.name(p): stores for p in hooks.pipelines_of(hooks.config_of(planned))}
    return to_document(hooks.commit_run(planned, stores, outputs, run_id, announced_since or nothing_announced))
