"""The typed records that cross task and process boundaries (plans, job summaries) and their JSON documents:
every plan and summary survives the trip through JSON unchanged, and a document this code cannot read is
refused naming the document and the key, not half read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

import pytest

from lakefeed.blob.config import BlobPipelineConfig
from lakefeed.blob.run_plan import BlobPlan
from lakefeed.blob.schedule import Batch
from lakefeed.blob.summary import BlobRunReport, RunSummary
from lakefeed.cdf.config import CdfConfig
from lakefeed.cdf.run_plan import CdfJob, CdfPlan, PipelinePlan
from lakefeed.cdf.summary import CdfPipelineReport, CdfRunReport, CdfSummary
from lakefeed.checkpoint import TableMark
from lakefeed.crdb.config import CrdbConfig
from lakefeed.crdb.run_plan import CrdbPlan, ResolvedRange
from lakefeed.crdb.summary import CrdbRunReport, CrdbSummary, TopicSummary
from lakefeed.documents import from_document, optional, to_document
from lakefeed.errors import ConfigError, DocumentError
from lakefeed.times import parse_time

MARKS = {"/lake/t": TableMark("id-1", 4)}


def through_json(record: Any) -> Any:
    """``record`` written as its document, sent as JSON (an XCom, a summary file) and read back."""
    return from_document(type(record), json.loads(json.dumps(to_document(record))), "a test document")


RECORDS = [
    BlobPlan(
        kind="scheduled",
        batches=[Batch(parse_time("2026-01-01T00:10Z"), parse_time("2026-01-01T02:10Z"))],
        windows=2,
        last_consumable=parse_time("2026-01-01T03:10Z"),
        feed="file:///feed",
        grid_minute=10,
        origin=parse_time("2026-01-01T00:10Z"),
        watermark=None,
        targets=["/lake/events", "/lake/state"],
        target_tables={"events": "/lake/events", "state": "/lake/state"},
        data_loss={"windows": ["2026-01-01T00:10:00Z"], "acknowledgedBy": "r"},
        target_marks=MARKS,
        segment_marks={"2026-01-01T02:10:00Z": "2026-01-01T01:10:00Z", "2026-01-01T00:10:00Z": None},
        segments_listed_through=parse_time("2026-01-01T03:10Z"),
        config=BlobPipelineConfig(windows_per_batch=2, spark_conf={"spark.sql.shuffle.partitions": "4"}),
    ),
    CrdbPlan(
        kind="backfill",
        batches=[ResolvedRange(None, "1.0000000000"), ResolvedRange("1.0000000000", "2.0000000001")],
        sink="file:///sink",
        resolved_before=None,
        newest_resolved="2.0000000001",
        target_root="/lake/crdb",
        target_marks={},
        config=CrdbConfig(parquet_keys={"users": ["id"]}),
    ),
    CdfPlan(
        kind="scheduled",
        jobs=[CdfJob("orders", "changes", start=0, end=2), CdfJob("orders", "full-refresh", version=7)],
        pipelines={
            "orders": PipelinePlan(
                kind="scheduled", origin=0, latest=7, source_table_id="s", applied_before=None, target_marks=MARKS
            )
        },
        config=CdfConfig(),
    ),
    RunSummary(windows=["2026-01-01T00:10:00Z"], last_consumable="2026-01-01T03:10:00Z", segments=[], chunk_files=3),
    CrdbSummary(after_resolved=None, through_resolved="1.0", topics={"users": TopicSummary(inserted=2)}),
    CdfSummary(source="/s", target="/t", starting_version=0, ending_version=2, latest_version=2, inserted=1),
    BlobRunReport(
        kind="scheduled",
        windows_planned=2,
        batches=1,
        totals={"records_read": 7, "events_inserted": 3},
        last_consumable=parse_time("2026-01-01T03:10Z"),
        grid_minute=10,
        watermark_before=None,
        watermark=parse_time("2026-01-01T02:10Z"),
        checkpoint_moved=True,
        spark_seconds=1.5,
    ),
    CrdbRunReport(
        kind="reset",
        batches=2,
        batches_failed=[{"after": None, "through": "1.0", "refused": "FeedCorruptError: x"}],
        totals={"messages_read": 9},
        resolved_before="1.0",
        resolved=None,
        newest_resolved="2.0",
        checkpoint_moved=False,
    ),
    CdfRunReport(
        kind="scheduled",
        pipelines={
            "orders": CdfPipelineReport(
                kind="scheduled",
                jobs=1,
                versions=[[0, 2]],
                totals={"rows_read": 4},
                applied_before=None,
                applied_version=2,
                latest_version=2,
                lag_versions=0,
                spark_seconds=2.0,
            ),
            "gone": CdfPipelineReport(
                kind="scheduled",
                jobs=0,
                refused="CheckpointMismatchError: x",
                applied_before=1,
                applied_version=1,
                latest_version=3,
            ),
        },
    ),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda record: type(record).__name__)
def test_every_plan_and_summary_survives_the_trip_through_json_unchanged(record):
    assert through_json(record) == record


def test_documents_keep_the_wire_names_and_leave_out_unset_optional_fields():
    plan = RECORDS[0]
    document = to_document(plan)
    assert document["version"] == 1 and document["gridMinute"] == 10
    assert document["batches"] == [{"start": "2026-01-01T00:10:00Z", "end": "2026-01-01T02:10:00Z"}]
    assert document["targetMarks"] == {"/lake/t": {"tableId": "id-1", "version": 4}}
    assert document["config"]["windows_per_batch"] == 2  # the configuration as the Variable spells it
    assert to_document(CdfJob("orders", "full-refresh", version=7)) == {
        "pipeline": "orders",
        "mode": "full-refresh",
        "version": 7,
    }


def test_a_run_report_keeps_its_totals_beside_its_own_keys_as_the_monitor_reads_them():
    blob = to_document(RECORDS[6])
    assert blob["recordsRead"] == 7 and blob["eventsInserted"] == 3 and "totals" not in blob
    assert blob["watermark"] == "2026-01-01T02:10:00Z" and blob["sparkSeconds"] == 1.5 and blob["version"] == 1
    cdf = to_document(RECORDS[8])["pipelines"]
    assert cdf["orders"]["rowsRead"] == 4 and cdf["orders"]["checkpointReset"] is None
    assert cdf["gone"]["refused"].startswith("CheckpointMismatchError") and "rowsRead" not in cdf["gone"]
    assert "refused" not in cdf["orders"] and "sparkSeconds" not in cdf["gone"]


def test_a_plan_made_before_a_key_existed_reads_with_its_default():
    document = to_document(RECORDS[0])
    del document["targetMarks"], document["segmentMarks"], document["version"]
    plan = from_document(BlobPlan, document, "the run's plan")
    assert plan.target_marks is None and plan.segment_marks == {} and plan.version == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("feed"), "the run's plan: feed is missing"),
        (lambda d: d.update(gridMinute="10"), "the run's plan: gridMinute must be int, got '10'"),
        (lambda d: d.update(gridMinute=True), "gridMinute must be int, got True"),
        (lambda d: d.update(lastConsumable="yesterday"), "lastConsumable must be an ISO time, got 'yesterday'"),
        (lambda d: d.update(batches={"start": 1}), "batches must be a list"),
        (lambda d: d["batches"][0].pop("end"), "the run's plan: batches\\[0\\]: end is missing"),
        (
            lambda d: d.update(targetMarks={"/lake/t": {"tableId": 3, "version": 1}}),
            "targetMarks./lake/t: tableId must be str, got 3",
        ),
        (lambda d: d.update(version=2), "version 2 is newer than this code reads \\(up to 1\\)"),
    ],
)
def test_a_document_this_code_cannot_read_is_refused_naming_the_key(change, message):
    document = json.loads(json.dumps(to_document(RECORDS[0])))
    change(document)
    with pytest.raises(DocumentError, match=message):
        from_document(BlobPlan, document, "the run's plan")
    with pytest.raises(DocumentError, match="expected a JSON object, got list"):
        from_document(BlobPlan, [document], "the run's plan")


def test_a_carried_configuration_is_checked_as_the_variable_is():
    document = to_document(RECORDS[0])
    document["config"]["windows_per_batch"] = 0
    with pytest.raises(ConfigError, match="the run's plan: config: max_windows_per_run and windows_per_batch"):
        from_document(BlobPlan, document, "the run's plan")


@dataclass
class _Stored:
    DOCUMENT_VERSION: ClassVar[int] = 2

    at: datetime
    items: tuple[int, ...] = ()
    labels: dict[str, list[str]] = field(default_factory=dict)
    note: str | None = optional()
    version: int = DOCUMENT_VERSION


def test_the_codec_reads_nested_lists_tuples_and_objects_and_older_versions():
    record = _Stored(parse_time("2026-01-01T00:00Z"), (1, 2), {"a": ["x"]})
    assert to_document(record) == {"at": "2026-01-01T00:00:00Z", "items": [1, 2], "labels": {"a": ["x"]}, "version": 2}
    assert through_json(record) == record
    assert from_document(_Stored, {"at": "2026-01-01T00:00:00Z", "version": 1}, "d").items == ()
    with pytest.raises(DocumentError, match="d: labels.a\\[0\\] must be str, got 1"):
        from_document(_Stored, {"at": "2026-01-01T00:00:00Z", "labels": {"a": [1]}}, "d")
