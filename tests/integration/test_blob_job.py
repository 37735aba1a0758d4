"""The blob change feed job end to end: real Avro feed, real Spark, real Delta, against ground truth."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from datetime import UTC
from pathlib import Path

import fastavro
import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed

from lakefeed.blob.feed import segment_manifest_path
from lakefeed.blob.job import reading, run
from lakefeed.blob.timegrid import HOUR
from lakefeed.errors import FeedCorruptError, WindowNotReadyError
from lakefeed.times import format_time

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SPEC = FeedSpec(hours=4, events_per_hour=800, shards=2, records_per_chunk=300, stray_rate=0.01, seed=3)


@pytest.fixture
def feed(tmp_path):
    root = tmp_path / "feed"
    truth = generate_feed(root, SPEC)
    return root, truth


def ingest(spark, root, tables, start, end):
    return run(spark, reading(str(root), start, end), str(root), str(tables / "events"), str(tables / "state"))


def snapshot(spark, tables):
    events = {
        r["id"]: r.asDict(recursive=True) for r in spark.read.format("delta").load(str(tables / "events")).collect()
    }
    state = {
        r["subject"]: r.asDict(recursive=True) for r in spark.read.format("delta").load(str(tables / "state")).collect()
    }
    for row in events.values():
        row.pop("ingestedAt")
    for row in state.values():
        row.pop("updatedAt")
    return events, state


def table_version(spark, path):
    from delta.tables import DeltaTable

    return DeltaTable.forPath(spark, str(path)).history(1).collect()[0]["version"]


def assert_matches_truth(spark, tables, truth, windows):
    events, state = snapshot(spark, tables)
    expected = {e.id: e for e in truth.claimed(windows)}
    assert set(events) == set(expected)
    for event_id, want in expected.items():
        got = events[event_id]
        assert format_time(got["claimWindow"].replace(tzinfo=UTC)) == want.window
        assert (got["eventTime"], got["eventType"], got["subject"], got["isStray"]) == (
            want.eventTime,
            want.eventType,
            want.subject,
            want.stray,
        )
        assert got["data"]["sequencer"] == want.sequencer
    expected_state = truth.state(windows)
    assert set(state) == set(expected_state)
    for subject, want in expected_state.items():
        assert state[subject]["eventId"] == want.id
        assert state[subject]["isDeleted"] is (want.eventType == "BlobDeleted")
    return events, state


def test_full_run_matches_ground_truth_and_rerun_changes_nothing(spark, feed, tmp_path):
    root, truth = feed
    windows = truth.ready_windows()
    first = ingest(spark, root, tmp_path, windows[0], windows[-1] + HOUR)
    before = assert_matches_truth(spark, tmp_path, truth, windows)
    assert first.events_inserted == first.events_unique == len(truth.claimed(windows))
    assert first.strays == sum(e.stray for e in truth.claimed(windows)) > 0
    assert first.duplicates_removed > 0 and first.control_dropped > 0
    assert first.empty_chunk_files == 1
    assert first.state_inserted == len(truth.state(windows)) and first.commits_made == 2
    for table in ("events", "state"):  # a first load creates each table holding its rows: one commit
        (creation,) = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / table}`").collect()
        assert creation["operation"] == "WRITE"
    # Statistics on the columns that follow the feed's time, which the MERGE (eventTimeTicks) and queries by time
    # prune with; every file holds a hash-partitioned share of the run's events, so the others span their range.
    assert _statistics_kept(tmp_path / "events") == {
        "eventTimestamp",
        "eventTimeTicks",
        "claimWindow",
        "segmentStart",
        "ingestedAt",
    }
    history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'events'}`").collect()
    assert json.loads(history[0]["userMetadata"])["windows"] == [format_time(w) for w in windows]

    versions = (table_version(spark, tmp_path / "events"), table_version(spark, tmp_path / "state"))
    again = ingest(spark, root, tmp_path, windows[0], windows[-1] + HOUR)
    assert (again.events_inserted, again.state_inserted, again.state_updated) == (0, 0, 0)
    assert snapshot(spark, tmp_path) == before
    # A replay writes nothing at all: no commit on either table, and the summary says so.
    assert (table_version(spark, tmp_path / "events"), table_version(spark, tmp_path / "state")) == versions
    assert (again.commits_made, again.events_bytes_written, again.state_bytes_written, again.state_rows_copied) == (
        0,
        0,
        0,
        0,
    )


def _statistics_kept(table: Path) -> set[str]:
    """The columns whose minimum the events table's files record (every file alike), from its log."""
    kept = set()
    for commit in sorted((table / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            add = json.loads(line).get("add")
            if add:
                kept.add(frozenset(json.loads(add["stats"])["minValues"]))
    (columns,) = kept
    return set(columns)


def test_an_hourly_run_writes_its_changes_not_the_tables(spark, feed, tmp_path):
    """The state table is updated in place (deletion vectors): a run rewrites no file and copies no row,
    whatever the tables already hold; the events MERGE only appends."""
    root, truth = feed
    windows = truth.ready_windows()
    ingest(spark, root, tmp_path, windows[0], windows[-2])
    last = ingest(spark, root, tmp_path, windows[-2], windows[-1] + HOUR)
    assert last.state_updated > 0 and last.commits_made == 2
    assert (last.state_files_rewritten, last.state_rows_copied) == (0, 0)
    metrics = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'state'}`").collect()[0]["operationMetrics"]
    assert int(metrics["numTargetDeletionVectorsAdded"]) > 0 and int(metrics["numTargetRowsCopied"]) == 0
    events_metrics = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'events'}`").collect()[0]["operationMetrics"]
    assert int(events_metrics.get("numTargetFilesRemoved", 0)) == 0
    assert_matches_truth(spark, tmp_path, truth, windows)


def test_tables_made_before_deletion_vectors_and_event_time_statistics_are_upgraded_once(spark, feed, tmp_path):
    root, truth = feed
    windows = truth.ready_windows()
    ingest(spark, root, tmp_path, windows[0], windows[1])
    spark.sql(f"ALTER TABLE delta.`{tmp_path / 'state'}` SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'false')")
    spark.sql(f"ALTER TABLE delta.`{tmp_path / 'events'}` UNSET TBLPROPERTIES ('delta.dataSkippingStatsColumns')")
    ingest(spark, root, tmp_path, windows[1], windows[-1] + HOUR)
    properties = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path / 'state'}`").collect()}
    assert properties["delta.enableDeletionVectors"] == "true"
    # An events table made before it keeps statistics on eventTimeTicks (what its MERGE prunes by) from then on.
    events = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{tmp_path / 'events'}`").collect()}
    assert "eventTimeTicks" in events["delta.dataSkippingStatsColumns"].split(",")
    assert_matches_truth(spark, tmp_path, truth, windows)


def test_windows_one_by_one_in_any_order_equal_one_clean_run(spark, feed, tmp_path):
    root, truth = feed
    windows = truth.ready_windows()
    order = list(reversed(windows))  # newest first: older windows must never regress state
    random.Random(5).shuffle(order[1:])
    for window in order + order[:2]:  # and a few replays
        ingest(spark, root, tmp_path, window, window + HOUR)
    assert_matches_truth(spark, tmp_path, truth, windows)


def test_a_first_load_killed_while_writing_leaves_files_the_next_run_ignores(spark, feed, tmp_path):
    """A first load writes its files before the commit that creates the table: killed in between, it
    leaves data files and no log. They are no table: the re-run creates it, and none of their rows
    (here: a copy of the same events) reaches it."""
    root, truth = feed
    windows = truth.ready_windows()
    ingest(spark, root, tmp_path / "killed", windows[0], windows[-1] + HOUR)
    for table in ("events", "state"):
        shutil.rmtree(tmp_path / "killed" / table / "_delta_log")
        shutil.copytree(tmp_path / "killed" / table, tmp_path / table)
    again = ingest(spark, root, tmp_path, windows[0], windows[-1] + HOUR)
    assert again.events_inserted == again.events_unique == len(truth.claimed(windows))
    assert again.commits_made == 2
    assert_matches_truth(spark, tmp_path, truth, windows)
    assert spark.read.format("delta").load(str(tmp_path / "events")).count() == again.events_unique


def test_window_not_ready_is_refused_before_spark(feed):
    root, _truth = feed
    last = SPEC.last_consumable
    with pytest.raises(WindowNotReadyError, match=format_time(last)):
        reading(str(root), last - HOUR, last + HOUR)


def _truncate_chunk(root: Path) -> str:
    chunk = sorted(p for p in (root / "log/01/2026/01/01/0110").glob("*.avro") if p.stat().st_size > 1000)[0]
    chunk.write_bytes(chunk.read_bytes()[:-200])
    return str(chunk.relative_to(root))


def _not_avro_chunk(root: Path) -> str:
    chunk = sorted(p for p in (root / "log/00/2026/01/01/0110").glob("*.avro") if p.stat().st_size > 0)[0]
    chunk.write_bytes(b"this is not an Avro container file")
    return str(chunk.relative_to(root))


def _malformed_manifest(root: Path) -> str:
    relative = segment_manifest_path(SPEC.start + HOUR)
    (root / relative).write_text('{"status": "Finalized", "chunkFilePaths": [')
    return relative


def _manifest_outside_log(root: Path) -> str:
    relative = segment_manifest_path(SPEC.start + HOUR)
    manifest = json.loads((root / relative).read_text())
    manifest["chunkFilePaths"].append("$blobchangefeed/log/../meta/")
    (root / relative).write_text(json.dumps(manifest))
    return relative


def _unknown_schema_version(root: Path) -> str:
    chunk = root / "log/00/2026/01/01/0110/00000.avro"
    with chunk.open("rb") as handle:
        reader = fastavro.reader(handle)
        schema, records = reader.writer_schema, list(reader)
    records[-1]["schemaVersion"] = 9
    with chunk.open("wb") as handle:
        fastavro.writer(handle, schema, records)
    return str(chunk.relative_to(root))


@pytest.mark.parametrize(
    "corrupt", [_truncate_chunk, _not_avro_chunk, _malformed_manifest, _manifest_outside_log, _unknown_schema_version]
)
def test_bad_input_fails_naming_the_file_and_writes_nothing(spark, feed, tmp_path, corrupt):
    root, truth = feed
    windows = truth.ready_windows()
    ingest(spark, root, tmp_path, windows[0], windows[1])  # targets exist, holding window 0
    versions = (table_version(spark, tmp_path / "events"), table_version(spark, tmp_path / "state"))
    before = snapshot(spark, tmp_path)
    culprit = corrupt(root)
    with pytest.raises(FeedCorruptError, match=culprit.replace("$", r"\$")):
        ingest(spark, root, tmp_path, windows[1], windows[-1] + HOUR)
    assert (table_version(spark, tmp_path / "events"), table_version(spark, tmp_path / "state")) == versions
    assert snapshot(spark, tmp_path) == before


def _spark_submit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["spark-submit", str(ROOT / "spark_jobs" / "blob_changefeed_job.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_spark_submit_contract_on_a_corrupt_feed_exits_2_and_writes_nothing(feed, tmp_path):
    root, truth = feed
    culprit = _truncate_chunk(root)
    windows = truth.ready_windows()
    result = _spark_submit(
        "--feed-root",
        str(root),
        "--window-start",
        format_time(windows[0]),
        "--window-end",
        format_time(windows[-1] + HOUR),
        "--events-table",
        str(tmp_path / "events"),
        "--state-table",
        str(tmp_path / "state"),
    )
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"FeedCorruptError: {root}/{culprit}: corrupt or truncated Avro" in result.stdout + result.stderr
    assert not (tmp_path / "events").exists() and not (tmp_path / "state").exists()


def test_spark_submit_contract_ingests_and_reports(feed, tmp_path):
    root, truth = feed
    windows = truth.ready_windows()
    summary_file = tmp_path / "summary.json"
    result = _spark_submit(
        "--feed-root",
        str(root),
        "--window-start",
        format_time(windows[1]),
        "--window-end",
        format_time(windows[3]),
        "--events-table",
        str(tmp_path / "events"),
        "--state-table",
        str(tmp_path / "state"),
        "--summary-json",
        str(summary_file),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert summary["windows"] == [format_time(w) for w in windows[1:3]]
    assert summary["eventsInserted"] == len(truth.claimed(windows[1:3]))
    # spark-submit merges the driver's stderr into stdout; the summary is the one JSON line.
    [printed] = [line for line in result.stdout.splitlines() if line.startswith('{"windows"')]
    assert json.loads(printed) == summary


def _empty_the_shard(root, shard_path: str) -> set[str]:
    """Delete a shard folder's chunk files (the folder stays, its manifest names it); the event ids they held."""
    ids = set()
    for chunk in sorted((root / shard_path).glob("*.avro")):
        with chunk.open("rb") as handle:
            ids.update(r["id"] for r in fastavro.reader(handle))
        chunk.unlink()
    return ids


def _whole_feed_args(root, windows, tmp_path, summary_file) -> list[str]:
    """The job's arguments for every ready window of the feed, into tables under ``tmp_path``."""
    return [
        "--feed-root",
        str(root),
        "--window-start",
        format_time(windows[0]),
        "--window-end",
        format_time(windows[-1] + HOUR),
        "--events-table",
        str(tmp_path / "events"),
        "--state-table",
        str(tmp_path / "state"),
        "--summary-json",
        str(summary_file),
    ]


def test_spark_submit_refuses_a_shard_lost_to_retention_until_acknowledged(spark, feed, tmp_path):
    """Retention deleted one shard's chunk files of the feed's oldest segment but not yet its manifest: no older
    segment proves otherwise, so the job exits 2 before Spark starts, naming the manifest, the shard folder,
    why and the windows; acknowledged, it applies the rest."""
    root, truth = feed
    windows = truth.ready_windows()
    lost_shard = f"log/01/{SPEC.start:%Y/%m/%d/%H%M}/"  # the feed's oldest segment
    lost_ids = _empty_the_shard(root, lost_shard)
    assert lost_ids
    summary_file = tmp_path / "summary.json"
    args = _whole_feed_args(root, windows, tmp_path, summary_file)

    refused = _spark_submit(*args)
    assert refused.returncode == 2, refused.stderr[-3000:]
    reason = json.loads((tmp_path / "summary.refused.json").read_text())["error"]
    assert reason.startswith("DataLossError: ")
    assert f"{root}/{segment_manifest_path(SPEC.start)}" in reason and f"{root}/{lost_shard}" in reason
    assert "it is the feed's oldest segment" in reason
    # The oldest segment S feeds windows S-1h, S and S+1h.
    assert ", ".join(format_time(w) for w in windows[:3]) in reason and format_time(windows[3]) not in reason
    assert "--acknowledge-data-loss" in reason
    assert not summary_file.exists()
    assert not (tmp_path / "events").exists() and not (tmp_path / "state").exists()

    acknowledged = _spark_submit(*args, "--acknowledge-data-loss")
    assert acknowledged.returncode == 0, acknowledged.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert summary["missingShards"] == [{"segment": format_time(SPEC.start), "shard": lost_shard}]
    assert summary["emptyShards"] == 0 and [v["verdict"] for v in summary["shardVerdicts"]] == ["deleted"]
    expected = {e.id for e in truth.claimed(windows)} - lost_ids
    events = spark.read.format("delta").load(str(tmp_path / "events")).select("id", "segmentStart", "shard").collect()
    assert {r["id"] for r in events} == expected
    assert summary["eventsInserted"] == len(expected)
    assert {r["shard"] for r in events if r["segmentStart"].hour == SPEC.start.hour} == {"00"}


def test_spark_submit_reads_an_empty_shard_of_a_young_segment_as_empty_and_counts_it(spark, feed, tmp_path):
    """A segment manifest names a shard folder holding no chunk file while an older segment still holds all
    of its: retention deletes by age, so it has not reached this one; the shard had no events that hour (as
    Azure's clients read it). The job applies the windows, counts the shard (emptyShards) and says why; with
    the account's retention given and the segment older than it, the same shard is refused as a loss."""
    root, truth = feed
    windows = truth.ready_windows()
    empty_shard = f"log/01/{SPEC.start + HOUR:%Y/%m/%d/%H%M}/"
    gone = _empty_the_shard(root, empty_shard)
    summary_file = tmp_path / "summary.json"
    args = _whole_feed_args(root, windows, tmp_path, summary_file)
    aged = _spark_submit(*args, "--change-feed-retention-days", "7")  # the 2026-01-01 segment is older
    assert aged.returncode == 2, aged.stderr[-3000:]
    reason = json.loads((tmp_path / "summary.refused.json").read_text())["error"]
    assert "past the account's change feed retention of 7 days" in reason and f"{root}/{empty_shard}" in reason

    applied = _spark_submit(*args)
    assert applied.returncode == 0, applied.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert summary["emptyShards"] == 1 and summary["missingShards"] == []
    [verdict] = summary["shardVerdicts"]
    assert verdict["shard"] == empty_shard and verdict["verdict"] == "empty"
    assert f"an older segment, {format_time(SPEC.start)}, still holds all its chunk files" in verdict["reason"]
    events = {r["id"] for r in spark.read.format("delta").load(str(tmp_path / "events")).select("id").collect()}
    assert events == {e.id for e in truth.claimed(windows)} - gone


def test_two_jobs_merging_the_same_tables_at_once_both_commit(spark, feed, tmp_path):
    """Two runs of overlapping windows at once (a backfill beside a scheduled run), both first loads: each
    table is created once, holding the rows of the run that won its creation; the other run merges into
    it. Delta's write conflicts are retried inside each job (both MERGEs are idempotent), so both exit 0
    and the tables are right."""
    root, truth = feed
    windows = truth.ready_windows()
    args = [
        "--feed-root",
        str(root),
        "--events-table",
        str(tmp_path / "events"),
        "--state-table",
        str(tmp_path / "state"),
    ]
    jobs = [
        subprocess.Popen(
            [
                "spark-submit",
                str(ROOT / "spark_jobs" / "blob_changefeed_job.py"),
                *args,
                "--window-start",
                format_time(start),
                "--window-end",
                format_time(end),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for start, end in ((windows[1], windows[-1] + HOUR), (windows[0], windows[-1] + HOUR))
    ]
    outputs = [job.communicate(timeout=600)[0] for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert_matches_truth(spark, tmp_path, truth, windows)
    for table in ("events", "state"):
        history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / table}`").orderBy("version").collect()
        assert history[0]["operation"] == "WRITE"
        assert all(row["operation"] != "WRITE" for row in history[1:])
    retried = sum(output.count("a concurrent writer committed first") for output in outputs)
    print(f"conflicting commits retried: {retried}")
