"""What the pipeline monitor shows, computed from what a pipeline leaves behind: its checkpoint, its
source's position, and the run summaries its commit task keeps in XCom.

Pure functions (no Airflow, no I/O) so the figures are unit-tested; the plugin
(:mod:`lakefeed_airflow.monitor`) gathers the inputs from Airflow's metadata and JVM-free source reads.
Every row is one DAG run; figures a run did not report are ``None`` (the page shows a dash). A run
that failed carries its reason in words (:func:`explain`: the error its first failing task raised, what
kind of stop it is, what to do next), and :func:`health` turns the rows into the card's headline, so
every figure on the page comes from these rows.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from lakefeed.azure import REDACTION_REGEX

log = logging.getLogger(__name__)

REDACTED = "***"
_SECRET_VALUE = re.compile(r"(?i)((?:sig|accountkey|sharedaccesssignature|password|secret)=)[^&;\s'\"]+")
_SECRET_NAME = re.compile(REDACTION_REGEX)


@dataclass
class RunRow:
    """One DAG run of a pipeline, with the figures of its run summary."""

    runId: str
    runType: str
    state: str
    start: str | None
    end: str | None
    wallSeconds: float | None
    kind: str | None = None  # scheduled | backfill | reset (the summary's position rule)
    applied: str | None = None  # windows, versions or resolved span, for people
    read: int | None = None  # records / change rows / messages read
    claimed: int | None = None  # blob: events of the run's windows
    strays: int | None = None  # blob: events of other hours met while reading neighbours
    duplicates: int | None = None
    inserted: int | None = None
    updated: int | None = None
    deleted: int | None = None
    quarantined: int | None = None  # crdb: lines set aside in the quarantine table
    sparkSeconds: float | None = None
    lag: float | None = None
    failedBatches: list[dict[str, Any]] = field(default_factory=list)
    targetsChanged: list[dict[str, Any]] = field(default_factory=list)
    purpose: str = "pipeline"  # pipeline (moves the checkpoint) | backfill (re-applies a range it names)
    outcome: str | None = None  # applied | not ready | up to date | refused | failed | running | queued
    reason: dict[str, Any] | None = None  # a failed run's :class:`Explanation`, as a dict

    @property
    def throughput(self) -> float | None:
        if self.read is None or not self.sparkSeconds:
            return None
        return round(self.read / self.sparkSeconds, 1)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "throughput": self.throughput}


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat().replace("+00:00", "Z") if moment else None


def run_base(
    run_id: str,
    run_type: str,
    state: str,
    start: datetime | None,
    end: datetime | None,
    *,
    purpose: str = "pipeline",
    outcome: str | None = None,
    reason: Explanation | None = None,
) -> dict[str, Any]:
    """The figures of a DAG run every pipeline's row starts from (``outcome``: :func:`outcome_of`)."""
    wall = round((end - start).total_seconds(), 1) if start and end else None
    return {
        "runId": run_id,
        "runType": run_type,
        "state": state,
        "start": _iso(start),
        "end": _iso(end),
        "wallSeconds": wall,
        "purpose": purpose,
        "outcome": outcome or state,
        "reason": reason.to_dict() if reason else None,
    }


def run_purpose(run_type: str, conf: dict[str, Any] | None, range_params: tuple[str, ...]) -> str:
    """``backfill`` for a run that re-applies a range it names (one of Airflow's Backfill runs, or a run
    whose params name a range), else ``pipeline``: a run that moves the checkpoint, whose failure stops the
    pipeline."""
    if run_type == "backfill" or any((conf or {}).get(name) not in (None, "") for name in range_params):
        return "backfill"
    return "pipeline"


def outcome_of(state: str, reported: bool, skipped: bool, reason: Explanation | None) -> str:
    """What became of a run, in a word: ``applied`` (its commit step reported), ``not ready`` (skipped with
    nothing applied: the range it names is not in the source yet, ``reason`` says why), ``up to date``
    (nothing new: it was skipped), ``refused`` (stopped by a refusal: nothing was written), ``failed``, or
    Airflow's state while it is not finished (``running``, ``queued``)."""
    if state == "failed":
        return "refused" if reason and reason.refused else "failed"
    if state == "success":
        if reported:
            return "applied"
        if skipped and reason is not None and reason.kind == "not ready":
            return "not ready"
        return "up to date" if skipped else "success"
    return state


def span(values: list[str]) -> str | None:
    """A run's applied positions for people: the one, or the first … the last (how many)."""
    if not values:
        return None
    return values[0] if len(values) == 1 else f"{values[0]} … {values[-1]} ({len(values)})"


def total(report: dict[str, Any], *keys: str) -> int | None:
    """The sum of the figures ``keys`` a run summary reports (None when it reports none of them)."""
    present = [report[k] for k in keys if report.get(k) is not None]
    return sum(present) if present else None


def figures_row(
    base: dict[str, Any],
    report: dict[str, Any],
    applied: str | None,
    figures: Mapping[str, tuple[str, ...]],
    failed: str = "batchesFailed",
    targets_changed: list[dict[str, Any]] | None = None,
    **fixed: Any,
) -> RunRow:
    """A run's row from its run summary (``report``): ``figures`` names, for each figure of the row, the
    summary's counts it adds up (:func:`total`); the kind, Spark time, failed jobs (``failed``) and changed
    targets are every feed's; ``fixed`` are figures the feed computes itself."""
    counts: dict[str, Any] = {name: total(report, *keys) for name, keys in figures.items()}
    return RunRow(
        **base,
        kind=report.get("kind"),
        applied=applied,
        sparkSeconds=report.get("sparkSeconds"),
        failedBatches=report.get(failed, []),
        targetsChanged=report.get("targetsChanged", []) if targets_changed is None else targets_changed,
        **counts,
        **fixed,
    )


@dataclass(frozen=True)
class Explanation:
    """Why a run stopped, for people: the error named, its message, what kind of stop it is and what to do.

    ``kind``: ``not ready`` (a range the source has not reached), ``data loss``, ``moved`` (a source or
    target is not the one the checkpoint was made on), ``bad input``, ``configuration``, ``checkpoint``,
    ``timeout``, or ``failed`` (anything else: transient, retried)."""

    task: str
    error: str
    message: str
    kind: str
    refused: bool
    remedy: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Wrappers Airflow and our tasks put around the error that stopped a run.
_WRAPPERS = ("AirflowFailException", "AirflowException", "RuntimeError")
_ERROR_NAME = re.compile(r"\b([A-Z][A-Za-z0-9]*(?:Error|Exception|Timeout|Refusal)): ")


def explain(task: str, text: str, reset: str) -> Explanation:
    """The :class:`Explanation` of a failed task's error ``text`` ("<ErrorClass>: message", possibly
    wrapped by Airflow's exceptions). ``reset`` names the control that re-initialises this pipeline
    (``Reset the checkpoint``, ``Full refresh``)."""
    from lakefeed import errors

    text = str(redact(text)).strip()
    names = _ERROR_NAME.findall(text)
    known = [n for n in names if isinstance(getattr(errors, n, None), type)]
    outer = [n for n in names if n not in _WRAPPERS]
    name = known[-1] if known else outer[0] if outer else names[0] if names else "Error"
    marker = f"{name}: "
    message = text[text.rindex(marker) + len(marker) :] if marker in text else text
    cls = getattr(errors, name, None)

    def kind_of() -> tuple[str, str]:
        if cls is not None and issubclass(cls, errors.WindowNotReadyError):
            return "not ready", (
                "Nothing is wrong with the pipeline: the range asked for is not in the source "
                "yet. Trigger it again once the source position on this card has passed its "
                "end; the scheduled runs ingest it anyway as it becomes ready."
            )
        if cls is not None and issubclass(cls, errors.DataLossError):
            return "data loss", (
                "Data the pipeline still needed is gone from the source; nothing was written. "
                "The message names the way on (acknowledging the loss, or a "
                f"{reset.lower()}); check what is missing before taking it."
            )
        if cls is not None and issubclass(cls, errors.CheckpointMismatchError):
            return "moved", (
                "A source or target is not the one the checkpoint was made on (replaced, "
                "recreated, restored or moved). Once you have checked the new one is right, "
                f"trigger a run with '{reset}' ticked."
            )
        if cls is not None and issubclass(cls, errors.CheckpointConflictError):
            return "failed", "Other runs kept moving the checkpoint; clear the task to retry it."
        if cls is not None and issubclass(cls, errors.CheckpointError):
            return "checkpoint", (
                f"The checkpoint named cannot be trusted: restore it, or trigger a run with '{reset}' ticked."
            )
        if cls is not None and issubclass(cls, (errors.ConfigError, errors.FeedConfigError)):
            return "configuration", (
                "Fix the pipeline's configuration Variable or the run's parameters as the "
                "message says, then trigger the run again."
            )
        if cls is not None and issubclass(cls, errors.Refusal):
            return "bad input", (
                "The file or range named cannot be read as its format promises; nothing was "
                "written. Repair or remove it at the source, then clear the failed task."
            )
        if name in ("AirflowSensorTimeout", "TaskDeferralTimeout", "AirflowTaskTimeout", "DagRunTimeout"):
            return "timeout", (
                "The task ran out of time. If the source is slow, raise the timeout in the "
                "pipeline's configuration; then clear the task."
            )
        return "failed", (
            "A failure that is not about the data (a lost executor, storage unavailable, a bug), "
            "retried as configured. Read the failed task's log, fix the cause and clear the task; "
            "the next run resumes from the checkpoint, nothing is lost."
        )

    kind, remedy = kind_of()
    refused = cls is not None and issubclass(cls, errors.Refusal) and kind != "failed"
    return Explanation(task=task, error=name, message=message, kind=kind, refused=refused, remedy=remedy)


def health(rows: list[RunRow]) -> dict[str, Any]:
    """The card's headline from its run rows (newest first): ``failing`` when the latest finished run that
    moves the checkpoint failed (the pipeline is stuck until someone acts), ``healthy`` when it succeeded
    (a backfill that was refused or failed since is a note, not the pipeline's state), ``no runs`` before
    the first finished one; with the counts of the rows shown."""
    finished = [r for r in rows if r.state in ("success", "failed")]
    latest = next((r for r in finished if r.purpose == "pipeline"), None)
    backfill = next((r for r in finished if r.purpose == "backfill"), None)
    counts = {
        outcome: sum(1 for r in rows if r.outcome == outcome)
        for outcome in ("applied", "not ready", "up to date", "refused", "failed", "running", "queued")
    }
    counts = {k: v for k, v in counts.items() if v}
    status = "no runs" if latest is None else "failing" if latest.state == "failed" else "healthy"
    if status == "failing":
        assert latest is not None
        text = f"The pipeline is failing: its latest run ({latest.runId}) was {latest.outcome}."
    elif status == "healthy":
        assert latest is not None
        text = f"The pipeline is healthy: its latest run ({latest.runId}) was {latest.outcome}."
    else:
        text = "No run of the pipeline has finished yet."
    note = None
    if backfill is not None and backfill.state == "failed":
        note = f"A backfill ({backfill.runId}) was {backfill.outcome}" + (
            f": {backfill.reason['kind']}." if backfill.reason else "."
        )
    return {
        "status": status,
        "text": text,
        "run": latest.runId if latest else None,
        "reason": latest.reason if latest and latest.state == "failed" else None,
        "backfillNote": note,
        "backfillRun": backfill.runId if note and backfill else None,
        "counts": counts,
        "shown": len(rows),
    }


def lag_of(
    unit: str, source_position: Any, checkpoint_position: Any, measure: Callable[[Any, Any], Any]
) -> dict[str, Any]:
    """The pipeline's lag now: ``measure(source, checkpoint)`` in ``unit``, or None when either is unknown."""
    value = (
        measure(source_position, checkpoint_position)
        if source_position is not None and checkpoint_position is not None
        else None
    )
    return {"value": value, "unit": unit}


def redact(text: Any) -> Any:
    """A value safe to show: secret-looking values in it (``sig=…``, ``AccountKey=…``) masked."""
    if not isinstance(text, str):
        return text
    return _SECRET_VALUE.sub(lambda m: m.group(1) + REDACTED, text)


def safe_config(config: dict[str, Any]) -> dict[str, Any]:
    """A pipeline config for display: keys that name secrets dropped, values with secrets masked."""
    shown = {}
    for key, value in config.items():
        if _SECRET_NAME.search(key):
            continue
        if isinstance(value, dict):
            value = safe_config(value)
        shown[key] = redact(value)
    return shown


# -- a card: one pipeline, as every feed describes it (``lakefeed.<feed>.monitoring``) --


@dataclass(frozen=True)
class Watched:
    """What the monitor shows of one pipeline, as its feed describes it: the checkpoint and the position it
    records, the source's position and the lag between them, and how a run summary becomes a row. The
    reads are callables the card makes once each, guarded: a source that cannot be read now is shown as
    that card's error, not the page's."""

    key: str  # the card's id on the page
    title: str
    config: dict[str, Any]  # shown through safe_config
    load_checkpoint: Callable[[], Any]  # the checkpoint (a lakefeed.checkpoint.Moves), read from its Variable
    checkpoint_label: str
    recorded: Callable[[Any], Any]  # checkpoint → the position it records, for people (None: none yet)
    position_label: str
    read_position: Callable[[Any], Any]  # the recorded position → the source's position now (JVM-free)
    lag_unit: str
    lag: Callable[[Any, Any], Any]  # (source position, recorded position) → the lag in lag_unit
    row: Callable[[dict[str, Any], dict[str, Any] | None], RunRow]  # (run_base, run summary) → the run's row


def guarded(read: Callable[[], Any]) -> tuple[Any, str | None]:
    """``(value, None)``, or ``(None, message)`` when it cannot be read now (the message redacted)."""
    try:
        return read(), None
    except Exception as exc:
        message = redact(f"{type(exc).__name__}: {exc}")
        log.warning("monitor: %s", message)
        return None, message


def card(watched: Watched, dag_id: str, runs: list[tuple[dict[str, Any], dict[str, Any] | None]]) -> dict[str, Any]:
    """The card of one pipeline: its checkpoint and source read now, and the rows of ``runs`` (the DAG's
    latest runs, newest first, each as :func:`run_base` and its run summary or None)."""
    checkpoint, error = guarded(watched.load_checkpoint)
    recorded = watched.recorded(checkpoint) if checkpoint is not None else None
    position, source_error = guarded(lambda: watched.read_position(recorded))
    rows = [watched.row(base, report) for base, report in runs]
    shown = [row.to_dict() for row in rows]
    return {
        "key": watched.key,
        "dagId": dag_id,
        "title": watched.title,
        "config": safe_config(watched.config),
        "checkpoint": {
            "label": watched.checkpoint_label,
            "value": recorded,
            "document": json.loads(checkpoint.to_json()) if checkpoint is not None else None,
        },
        "source": {"label": watched.position_label, "value": position, "error": source_error},
        "lag": lag_of(watched.lag_unit, position, recorded, watched.lag),
        "error": error,
        "runs": shown,
        "health": health(rows),
        "failedBatches": [{"runId": r["runId"], **b} for r in shown for b in r["failedBatches"]],
    }
