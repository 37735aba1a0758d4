"""What every spark-submit entry point shares at its end: the run summary, or the reason it refused.

The orchestrator reads these files: a summary means "this job's MERGEs
committed"; a refusal (exit code 2) carries the message naming the bad file or
range, so the task fails with it and is not retried.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, Callable


def write_summary(summary: dict, path: str | None) -> None:
    """Print the summary as one JSON line; write it to ``path`` atomically, if given.

    The file is written only after the job's MERGEs committed, so its presence
    means "this batch is done" to the orchestrator.
    """
    print(json.dumps(summary), flush=True)
    if path:
        _write_atomically(Path(path), summary)


def write_refusal(error: Exception, summary_path: str | None) -> None:
    """Leave the reason for a refusal next to where the summary would have gone."""
    if summary_path:
        _write_atomically(refusal_path(summary_path), {"error": f"{type(error).__name__}: {error}", "exitCode": 2})


def refusal_path(summary_path: str | Path) -> Path:
    """``<dir>/3.json`` → ``<dir>/3.refused.json``."""
    summary = Path(summary_path)
    return summary.with_name(summary.stem + ".refused.json")


def _write_atomically(target: Path, document: dict) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(json.dumps(document, indent=2))
    partial.replace(target)


def add_pipeline_id_argument(parser: Any) -> None:
    """``--pipeline-id``, which every entry point takes: the DAGs pass the pipeline's checkpoint Variable."""
    parser.add_argument("--pipeline-id", help="name of the pipeline running this job (the DAGs pass its checkpoint "
                                              "Variable); recorded as pipelineId in every commit's userMetadata, "
                                              "so a first run can tell a table it wrote from one it did not")


def run_spark_job(app_name: str, summary_path: str | None, prepare: Callable[[], Any],
                  work: Callable[[Any, Any], Any], pipeline_id: str | None = None) -> int:
    """``main()`` of every spark-submit entry point: the exit-code contract in one place.

    ``prepare()`` runs before Spark starts (cheap checks: a refused range costs no JVM);
    ``work(spark, prepared)`` returns the summary (a dataclass with ``to_dict``). A
    :class:`~lakefeed.errors.Refusal` from either exits 2, with its reason logged and left next
    to the summary path; nothing was written. Anything else propagates (exit 1, retried).
    ``pipeline_id`` tags every Delta commit the job makes (:data:`lakefeed.delta.COMMIT_TAGS`).
    """
    from lakefeed.delta import COMMIT_TAGS
    from lakefeed.errors import Refusal
    from lakefeed.targets import PIPELINE_ID

    if pipeline_id:
        COMMIT_TAGS[PIPELINE_ID] = pipeline_id
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger(app_name)
    try:
        prepared = prepare()
    except Refusal as exc:
        return _refused(log, exc, summary_path)
    from lakefeed.spark import get_session, ship_library

    spark = get_session(app_name)
    spark.sparkContext.setLogLevel("WARN")
    ship_library(spark)
    try:
        summary = work(spark, prepared)
    except Refusal as exc:
        return _refused(log, exc, summary_path)
    finally:
        spark.stop()
    log.info("summary %s", json.dumps(summary.to_dict()))
    write_summary(summary.to_dict(), summary_path)
    return 0


def _refused(log: logging.Logger, exc: Exception, summary_path: str | None) -> int:
    log.error("%s: %s", type(exc).__name__, exc)
    write_refusal(exc, summary_path)
    return 2
