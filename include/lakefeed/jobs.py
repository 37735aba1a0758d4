"""What every spark-submit entry point shares at its end: the run summary, or the reason it refused.

The job's driver leaves one JSON document where ``--summary-json`` says: the
summary (its MERGEs committed) or, on a refusal (exit code 2), the reason naming
the bad file or range next to it (``<name>.refused.json``). The submit task that
started the driver reads it and hands it on through XCom
(:class:`lakefeed_airflow.operators.LakefeedSparkSubmitOperator`): no other task
ever reads these files. In client deploy mode the location is a scratch folder of
the submit task; a driver running on the cluster writes to object storage
(``job_summary_root``), a URL opened through :class:`lakefeed.storage.Store` with the credentials
of the pipeline's connection (the driver: from its environment, which the submit task set from it).
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lakefeed.storage import Store

REFUSED_SUFFIX = ".refused.json"
FAILED_SUFFIX = ".failed.json"


def write_summary(summary: dict[str, Any], location: str | None) -> None:
    """Print the summary as one JSON line; write it to ``location`` (a path or URL), if given.

    The document is written only after the job's MERGEs committed, so its presence
    means "this batch is done" to the task that submitted the job.
    """
    print(json.dumps(summary), flush=True)
    if location:
        write_document(location, summary)


def write_refusal(error: Exception, summary_location: str | None) -> None:
    """Leave the reason for a refusal next to where the summary would have gone."""
    if summary_location:
        write_document(refusal_location(summary_location), {"error": f"{type(error).__name__}: {error}", "exitCode": 2})


def write_failure(error: BaseException, summary_location: str | None) -> None:
    """Leave the error of a job that failed (exit code 1, retried) next to where the summary would have
    gone, so the task that submitted it can say why in words; best effort (the failure itself may be the
    storage), secrets masked."""
    from lakefeed.monitor import redact

    if not summary_location:
        return
    try:
        write_document(
            failure_location(summary_location),
            {"error": redact(f"{type(error).__name__}: {error}")[:4000], "exitCode": 1},
        )
    except Exception:
        logging.getLogger(__name__).warning("could not leave the job's error beside its summary", exc_info=True)


def _stem(summary_location: str) -> str:
    return summary_location[: -len(".json")] if summary_location.endswith(".json") else summary_location


def refusal_location(summary_location: str) -> str:
    """``<dir>/3.json`` → ``<dir>/3.refused.json`` (a path or a URL)."""
    return _stem(summary_location) + REFUSED_SUFFIX


def failure_location(summary_location: str) -> str:
    """``<dir>/3.json`` → ``<dir>/3.failed.json`` (a path or a URL)."""
    return _stem(summary_location) + FAILED_SUFFIX


def _is_url(location: str) -> bool:
    return "://" in location and not location.startswith("file://")


def _remote(location: str) -> tuple[Store, str]:
    """The store of the folder holding a document at a URL, and the document's path in it: the credentials
    are the store's (the connection's scope on the Airflow side, the task's environment in a driver),
    never a client's fallback to the machine's identity."""
    from lakefeed.storage import Store

    folder, _, name = location.rstrip("/").rpartition("/")
    store = Store(folder)
    return store, store.path(name)


def write_document(location: str, document: dict[str, Any]) -> None:
    """A JSON document at a local path (written to a temporary name, then renamed) or a URL (one PUT,
    which object stores make visible whole or not at all)."""
    text = json.dumps(document, indent=2)
    if _is_url(location):
        store, path = _remote(location)
        with store.fs.open(path, "w") as handle:
            handle.write(text)
        return
    target = Path(location.removeprefix("file://"))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text(text)
    partial.replace(target)


def read_document(location: str) -> dict[str, Any] | None:
    """The JSON document at ``location`` (path or URL), or None when there is none."""
    document: dict[str, Any] | None
    if _is_url(location):
        store, path = _remote(location)
        try:
            with store.fs.open(path, "r") as handle:
                document = json.loads(handle.read())
                return document
        except FileNotFoundError:
            return None
    target = Path(location.removeprefix("file://"))
    document = json.loads(target.read_text()) if target.exists() else None
    return document


def remove_document(location: str) -> None:
    """Delete the document at ``location`` if it is there (best effort: a leftover is harmless)."""
    try:
        if _is_url(location):
            store, path = _remote(location)
            store.fs.rm(path)
        else:
            Path(location.removeprefix("file://")).unlink(missing_ok=True)
    except (FileNotFoundError, OSError):
        pass


def add_pipeline_id_argument(parser: Any) -> None:
    """``--pipeline-id``, which every entry point takes: the DAGs pass the pipeline's checkpoint Variable."""
    parser.add_argument(
        "--pipeline-id",
        help="name of the pipeline running this job (the DAGs pass its checkpoint "
        "Variable); recorded as pipelineId in every commit's userMetadata, "
        "so a first run can tell a table it wrote from one it did not",
    )


def run_spark_job(
    app_name: str,
    summary_path: str | None,
    prepare: Callable[[], Any],
    work: Callable[[Any, Any], Any],
    pipeline_id: str | None = None,
) -> int:
    """``main()`` of every spark-submit entry point: the exit-code contract in one place.

    ``prepare()`` runs before Spark starts (cheap checks: a refused range costs no JVM);
    ``work(spark, prepared)`` returns the summary (a dataclass with ``to_dict``). A
    :class:`~lakefeed.errors.Refusal` from either exits 2, with its reason logged and left next
    to the summary path; nothing was written. Anything else propagates (exit 1, retried), its error left
    next to the summary path too (:func:`write_failure`).
    ``pipeline_id`` tags every Delta commit the job makes (:data:`lakefeed.delta.COMMIT_TAGS`).
    """
    from lakefeed.delta import COMMIT_TAGS
    from lakefeed.errors import Refusal
    from lakefeed.targets import PIPELINE_ID

    if pipeline_id:
        COMMIT_TAGS[PIPELINE_ID] = pipeline_id
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, force=True, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # The Azure SDK logs each HTTP request and response at INFO (azure.core's http_logging_policy, ~30 lines
    # each, headers redacted): a task log would hold thousands of them. Its warnings and errors stay.
    logging.getLogger("azure").setLevel(logging.WARNING)
    log = logging.getLogger(app_name)
    try:
        prepared = prepare()
    except Refusal as exc:
        return _refused(log, exc, summary_path)
    except Exception as exc:
        write_failure(exc, summary_path)
        raise
    from lakefeed.spark import get_session, ship_library, stop_session

    spark = get_session(app_name)
    spark.sparkContext.setLogLevel("WARN")
    ship_library(spark)
    try:
        summary = work(spark, prepared)
    except Refusal as exc:
        return _refused(log, exc, summary_path)
    except Exception as exc:
        write_failure(exc, summary_path)
        raise
    finally:
        stop_session(spark)
    log.info("summary %s", json.dumps(summary.to_dict()))
    write_summary(summary.to_dict(), summary_path)
    return 0


def _refused(log: logging.Logger, exc: Exception, summary_path: str | None) -> int:
    log.error("%s: %s", type(exc).__name__, exc)
    write_refusal(exc, summary_path)
    return 2
