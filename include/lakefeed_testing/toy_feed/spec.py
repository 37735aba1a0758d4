"""The toy feed declared once: configuration, checkpoint, plan, job summary, report, hooks and spec."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from lakefeed import forms
from lakefeed import pipeline as skeleton
from lakefeed.checkpoint import Moves, TableMark, dump_document, marks_json, parse_document, targets_from
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.config import Carried, from_mapping, json_document
from lakefeed.documents import counted, totals
from lakefeed.errors import ConfigError, WindowNotReadyError
from lakefeed.feeds import FeedSpec
from lakefeed.lineage import Figures, JobLineage, JobOutcome
from lakefeed.monitor import RunRow, Watched
from lakefeed.progress import BACKFILL, RESET, SCHEDULED, position_after
from lakefeed.storage import StoreBase
from lakefeed.targets import current_marks

KEY, DAG_ID = "toy", "toy_files_to_delta"
FILE = re.compile(r"^(\d{5})\.json$")
REMEDY = skeleton.reset_remedy(DAG_ID, "it applies the folder again from its first file")


@dataclass(frozen=True)
class ToyConfig(Carried):
    source_root: str = "toy/source"
    target_table: str = "toy/target"
    files_per_job: int = 2
    checkpoint_variable: str = "lakefeed_toy_checkpoint"
    wasb_conn_id: str | None = None
    job_summary_root: str | None = None
    sensor_poke_seconds: float = 60.0
    sensor_timeout_seconds: float = 3000.0
    spark_conf: dict[str, Any] | None = None
    spark_job_timeout_minutes: float = 30.0

    @classmethod
    def from_json(cls, text: str | None, where: str) -> ToyConfig:
        return from_mapping(cls, json_document(text, where), where)


@dataclass(frozen=True)
class ToyCheckpoint(Moves):
    applied: int | None = None  # the last file applied
    source: str | None = None
    targets: dict[str, TableMark] = field(default_factory=dict)
    announced: dict[str, TableMark] = field(default_factory=dict)
    generation: int = 0
    updated_by: str | None = None

    @property
    def identity(self) -> str | None:
        return self.source

    def to_json(self) -> str:
        fields_ = {"applied": self.applied, "source": self.source, "targets": marks_json(self.targets)}
        extra = {"announced": marks_json(self.announced), "generation": self.generation, "updatedBy": self.updated_by}
        return dump_document("toy", {**fields_, **extra})

    @classmethod
    def from_json(cls, text: str | None, where: str) -> ToyCheckpoint:
        document = parse_document(text, where, "toy")
        if document is None:
            return cls()
        return cls(
            applied=document.get("applied"),
            source=document.get("source"),
            targets=targets_from(document, where),
            announced=targets_from(document, where, "announced"),
            generation=document.get("generation", 0),
            updated_by=document.get("updatedBy"),
        )


@dataclass(frozen=True)
class FileSpan:
    """Files ``first..last`` (inclusive): one job."""

    first: int
    last: int


@dataclass(frozen=True, kw_only=True)
class ToyPlan:
    DOCUMENT_VERSION: ClassVar[int] = 1

    version: int = DOCUMENT_VERSION
    kind: str
    batches: list[FileSpan]
    source: str
    target_marks: dict[str, TableMark] | None = None
    config: ToyConfig

    @property
    def identity(self) -> str:
        return self.source


@dataclass
class ToySummary:
    first: int
    last: int
    rows: int = counted()
    commits: list[dict[str, Any]] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass(kw_only=True)
class ToyReport(skeleton.RunReport):
    batches: int
    batches_failed: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict, metadata=totals(ToySummary))
    checkpoint_moved: bool
    applied_before: int | None
    applied: int | None


@dataclass(frozen=True)
class Listed:
    store: StoreBase
    numbers: list[int]


@dataclass(frozen=True)
class Files:
    kind: str
    numbers: list[int]


Range = tuple[int, int] | None


def numbered(store: StoreBase) -> list[int]:
    return sorted(int(m.group(1)) for e in store.list("") if (m := FILE.match(e.name)))


class ToyHooks(
    skeleton.OnePipelineHooks[Range, ToyConfig, ToyCheckpoint, Listed, Files, FileSpan, ToySummary, ToyPlan, ToyReport]
):
    plan_type = ToyPlan
    summary_type = ToySummary
    checkpoint_type = ToyCheckpoint
    readiness = "lakefeed_testing.toy_feed.spec:ready"

    def remedy(self, pipeline: ToyConfig) -> str:
        return REMEDY

    def targets(self, pipeline: ToyConfig) -> list[str]:
        return [pipeline.target_table]

    def watch(self, watching: skeleton.Watching[ToyConfig, ToyConfig, ToyCheckpoint]) -> dict[str, Any]:
        config = watching.config
        return {"source_root": config.source_root, "applied": watching.checkpoint(config).applied}

    def request(self, params: Mapping[str, Any], config: ToyConfig) -> skeleton.Request[Range]:
        first, last = params.get("first_file"), params.get("last_file")
        if (first is None) != (last is None):
            raise ConfigError("A backfill needs first_file and last_file (both inclusive).")
        asked = (int(first), int(last)) if first is not None and last is not None else None
        return skeleton.Request.of(params, asked, asked is not None, bool(params.get("reset_checkpoint")))

    def open(
        self, pipeline: ToyConfig, checkpoint: ToyCheckpoint, kind: str, where: str, storage: skeleton.Storage
    ) -> Listed:
        store = storage.feed(pipeline.source_root, pipeline.wasb_conn_id)
        return Listed(store, numbered(store))

    def source_identity(self, source: Listed) -> str:
        return source.store.identity

    def pending(self, found: skeleton.Found[Range, ToyConfig, ToyCheckpoint, Listed]) -> Files:
        source, checkpoint = found.source, found.checkpoint
        applied = checkpoint.applied if checkpoint.applied is not None else 0
        return Files(SCHEDULED, [n for n in source.numbers if n > applied])

    def in_range(self, pipeline: ToyConfig, source: Listed, request: skeleton.Request[Range]) -> Files:
        assert request.asked is not None
        first, last = request.asked
        if last not in source.numbers:
            raise WindowNotReadyError(f"{source.store.root} has no file {last:05d}.json yet")
        return Files(BACKFILL, [n for n in source.numbers if first <= n <= last])

    def in_interval(self, pipeline: ToyConfig, source: Listed, start: datetime, end: datetime) -> Files:
        raise ConfigError("the toy feed's files have no hours: backfill with first_file and last_file")

    def from_origin(self, pipeline: ToyConfig, source: Listed, request: skeleton.Request[Range]) -> Files:
        return Files(RESET, source.numbers)

    def adoptable(self, pipeline: ToyConfig, checkpoint: ToyCheckpoint, ready: Files) -> list[str]:
        return [pipeline.target_table] if ready.kind == RESET or checkpoint.applied is None else []

    def batch(self, pipeline: ToyConfig, ready: Files) -> list[FileSpan]:
        step, numbers = pipeline.files_per_job, ready.numbers
        return [FileSpan(numbers[i], numbers[min(i + step, len(numbers)) - 1]) for i in range(0, len(numbers), step)]

    def planned(
        self, planning: skeleton.Planning[Range, ToyConfig, ToyConfig, ToyCheckpoint, Listed, Files, FileSpan]
    ) -> ToyPlan:
        (part,) = planning.parts
        return ToyPlan(
            kind=planning.kind,
            batches=part.jobs,
            source=part.source.store.identity,
            target_marks=part.target_marks,
            config=planning.config,
        )

    def arguments(self, plan: ToyPlan) -> list[list[str]]:
        config = plan.config
        return [
            ["--source-root", config.source_root, "--first", str(b.first), "--last", str(b.last)]
            + ["--target-table", config.target_table, "--pipeline-id", config.checkpoint_variable]
            for b in plan.batches
        ]

    def lineage(self, plan: ToyPlan) -> list[JobLineage]:
        config = plan.config
        return [JobLineage(KEY, config.checkpoint_variable, [config.source_root], [config.target_table])] * len(
            plan.batches
        )

    def belongs(self, plan: ToyPlan, summary: ToySummary, job: FileSpan) -> bool:
        return (summary.first, summary.last) == (job.first, job.last)

    def announcing(self, credit: skeleton.Credit[ToyPlan, ToyConfig, ToySummary]) -> skeleton.Announcing:
        return skeleton.Announcing([credit.plan.config.target_table], {}, lambda entries: [])

    def advance(
        self,
        credit: skeleton.Credit[ToyPlan, ToyConfig, ToySummary],
        checkpoint: ToyCheckpoint,
        announced: dict[str, TableMark],
    ) -> ToyCheckpoint:
        plan, done = credit.plan, credit.done
        stored = checkpoint.applied + 1 if checkpoint.applied is not None and plan.kind == SCHEDULED else None
        origin = plan.batches[0].first if plan.batches else None
        spans = [(b.first, b.last + 1) for b in plan.batches]
        position = position_after(plan.kind, stored, spans, set(done), origin=origin)
        return checkpoint.moved(
            applied=None if position is None else position - 1,
            source=plan.source,
            targets=current_marks([plan.config.target_table]) if done else checkpoint.targets,
            announced=announced,
            updated_by=credit.run_id,
        )

    def one_report(
        self,
        plan: ToyPlan,
        outcome: skeleton.Outcome[ToyConfig, FileSpan, ToySummary, ToyCheckpoint],
        common: dict[str, Any],
    ) -> ToyReport:
        return ToyReport(**common, applied_before=outcome.before.applied, applied=outcome.after.applied)

    def position(self, checkpoint: ToyCheckpoint) -> str | None:
        return None if checkpoint.applied is None else str(checkpoint.applied)


def ready(storage: skeleton.Storage, *, source_root: str, applied: int | None) -> tuple[bool, dict[str, Any]]:
    newest = max(numbered(storage.feed(source_root, None)), default=None)
    return newest is not None and (applied is None or newest > applied), {"newest": newest, "applied": applied}


def watched(
    config: ToyConfig, checkpoints: Callable[[ToyConfig], CheckpointStore], storage: skeleton.Storage
) -> list[Watched]:
    return [
        Watched(
            key=KEY,
            title="Toy files → Delta",
            config={"source_root": config.source_root, "target_table": config.target_table},
            load_checkpoint=checkpoints(config).load,
            checkpoint_label="applied file",
            recorded=lambda checkpoint: checkpoint.applied,
            position_label="newest file",
            read_position=lambda _: max(numbered(storage.feed(config.source_root, None)), default=None),
            lag_unit="files",
            lag=lambda newest, applied: (newest or 0) - (applied or 0),
            row=lambda base, report: RunRow(**base),
        )
    ]


def lineage_outcome(lineage: JobLineage, summary: dict[str, Any]) -> JobOutcome:
    applied = {"unit": "file", "from": summary.get("first"), "through": summary.get("last")}
    return JobOutcome(applied, {"rows": int(summary.get("rows") or 0)}, [Figures(lineage.inputs[0])])


def form() -> dict[str, forms.Field]:
    return {
        "first_file": forms.range_end("Backfill from (file)", "The first file to apply again.", "integer"),
        "last_file": forms.range_end("Backfill through (file)", "The last file to apply again.", "integer"),
        "reset_checkpoint": forms.flag("Reset the checkpoint", "Apply the folder again from its first file."),
        "adopt_targets": forms.adopt_targets("the target table"),
    }


SPEC = FeedSpec(
    key=KEY,
    dag_id=DAG_ID,
    description="Toy numbered files → Delta, to show what adding a feed takes",
    tags=("toy",),
    hooks=ToyHooks(),
    config_type=ToyConfig,
    config_variable="lakefeed_toy_config",
    job_script="spark_jobs/toy_job.py",
    sensor_task="wait_for_files",
    plan_task="plan_files",
    apply_task="apply_files",
    commit_task="commit_checkpoint",
    alias="lakefeed_toy_targets",
    range_params=("first_file", "last_file"),
    reset_param="reset_checkpoint",
    reset_control="Reset the checkpoint",
    form=form,
    watched=watched,
    lineage_outcome=lineage_outcome,
)
