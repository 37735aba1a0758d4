"""Per-run folders where each spark-submit batch leaves its summary once its MERGEs committed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path


def fresh_run_folder(run_dir: str, run_id: str) -> Path:
    """An empty folder for this run's summaries (a re-planned run starts with no stale ones)."""
    folder = Path(run_dir) / re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def summary_path(folder: str | Path, index: int) -> str:
    return str(Path(folder) / f"{index}.json")


def finished_summaries(folder: str | Path, count: int) -> dict[int, dict]:
    """Summaries of the batches (of ``count``) that finished, by batch index."""
    found = {}
    for index in range(count):
        path = Path(summary_path(folder, index))
        if path.exists():
            found[index] = json.loads(path.read_text())
    return found


def fail_if_any_failed(failed: list, total: int, position: str | None) -> None:
    if failed:
        raise RuntimeError(
            f"{len(failed)} of {total} batch(es) failed (first: {failed[0]}); checkpoint is at {position}: "
            "the next run resumes from there"
        )
