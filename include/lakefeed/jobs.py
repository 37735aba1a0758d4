"""What every spark-submit entry point shares at its end: printing and saving the run summary."""

from __future__ import annotations

import json
from pathlib import Path


def write_summary(summary: dict, path: str | None) -> None:
    """Print the summary as one JSON line; write it to ``path`` atomically, if given.

    The file is written only after the job's MERGEs committed, so its presence
    means "this batch is done" to the orchestrator.
    """
    print(json.dumps(summary), flush=True)
    if path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        partial.write_text(json.dumps(summary, indent=2))
        partial.replace(target)
