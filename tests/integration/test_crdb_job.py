"""The CockroachDB changefeed job end to end: generated sink folders (duplicates, re-emissions, a restart,
a schema change, deletes of unseen keys, rows past their RESOLVED file, a late file), real Spark and
Delta, compared with the generator's ground truth; replays in any order; bad input refused."""

from __future__ import annotations

import itertools
import json
import random
import subprocess
from pathlib import Path

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.crdb.hlc import Hlc
from lakefeed.crdb.job import reading, run
from lakefeed.delta import create_table_with_rows, created_by_another
from lakefeed.errors import FeedCorruptError, WindowNotReadyError

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SPEC = SinkSpec(steps=30, changes_per_step=30, seed=17)
PARQUET_KEYS = {"customers": ["id"], "orders": ["region", "id"]}


def apply(spark, sink, lake, after, through, **options):
    planned = reading(str(sink), Hlc.parse(after) if after else None, Hlc.parse(through))
    return run(spark, str(sink), str(lake), *planned, **options)


def tables(spark, lake):
    found = {}
    for topic in ("customers", "orders"):
        rows = spark.read.format("delta").load(f"{str(lake).rstrip('/')}/{topic}").collect()  # a folder or URL
        found[topic] = {r["_crdb_key"]: r.asDict() for r in rows}
    return found


def versions(spark, lake):
    return {
        topic: spark.sql(f"DESCRIBE HISTORY delta.`{lake / topic}`").collect()[0]["version"]
        for topic in ("customers", "orders")
    }


def assert_matches_truth(spark, lake, truth):
    for topic, got in tables(spark, lake).items():
        assert {k for k, r in got.items() if r["_crdb_deleted"]} == truth.deleted(topic), topic
        assert_live_rows(topic, got, truth.live(topic))


def assert_live_rows(topic: str, got: dict, want: dict) -> None:
    """The table's live rows (``got``: key → row, tombstones included) are ``want``'s, value by value."""
    live = {k: r for k, r in got.items() if not r["_crdb_deleted"]}
    assert set(live) == set(want), (topic, sorted(set(live) ^ set(want))[:5])
    for key, row in want.items():
        for column, value in row.items():
            if isinstance(value, (dict, list)):
                value = json.dumps(value, separators=(",", ":"))
            got_value = live[key][column]
            assert got_value == value or (isinstance(value, float) and abs(got_value - value) < 1e-9), (
                topic,
                key,
                column,
                got_value,
                value,
            )


def test_one_pass_equals_the_truth_and_a_replay_writes_nothing(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SPEC)
    summary = apply(spark, tmp_path / "sink", tmp_path / "lake", None, truth.resolved[-1])
    assert_matches_truth(spark, tmp_path / "lake", truth)
    assert summary.messages_read == truth.messages and summary.duplicates_dropped >= truth.duplicates - 2
    assert summary.topics["customers"].added_columns == [] and summary.commits_made == 2
    before = versions(spark, tmp_path / "lake")
    again = apply(spark, tmp_path / "sink", tmp_path / "lake", None, truth.resolved[-1])
    assert versions(spark, tmp_path / "lake") == before  # nothing committed: every change is stale
    assert again.stale_skipped == sum(t.keys_changed for t in again.topics.values()) and again.commits_made == 0


def test_resolved_ranges_in_any_order_and_replayed_equal_one_pass(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SPEC)
    bounds = [None] + truth.resolved
    ranges = list(itertools.pairwise(bounds))
    order = list(reversed(ranges))
    random.Random(3).shuffle(order)
    for after, through in order + order[:2]:
        apply(spark, tmp_path / "sink", tmp_path / "lake", after, through)
    assert_matches_truth(spark, tmp_path / "lake", truth)


def test_a_late_file_named_before_an_applied_resolved_is_still_applied(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SPEC)
    [late] = truth.late_files
    held = tmp_path / "held"
    (tmp_path / "sink" / late).rename(held)
    cut = truth.resolved[2]  # the late file is named just before this RESOLVED file
    apply(spark, tmp_path / "sink", tmp_path / "lake", None, cut)
    held.rename(tmp_path / "sink" / late)  # it appears now, named before what was applied
    summary = apply(spark, tmp_path / "sink", tmp_path / "lake", cut, truth.resolved[-1])
    assert summary.late_files == [late]
    assert_matches_truth(spark, tmp_path / "lake", truth)
    assert apply(spark, tmp_path / "sink", tmp_path / "lake", cut, truth.resolved[-1]).late_files == []  # in the ledger


@pytest.mark.parametrize(
    "variant",
    [
        {"compression": "gzip", "partition_format": "hourly"},
        {"format": "parquet", "partition_format": "flat"},
    ],
)
def test_gzip_hourly_and_parquet_flat_sinks(spark, tmp_path, variant):
    truth = generate_sink(tmp_path / "sink", SinkSpec(**{**SPEC.__dict__, **variant, "steps": 15}))
    options = {"parquet_keys": PARQUET_KEYS} if variant.get("format") == "parquet" else {}
    apply(spark, tmp_path / "sink", tmp_path / "lake", None, truth.resolved[1], **options)
    apply(spark, tmp_path / "sink", tmp_path / "lake", truth.resolved[1], truth.resolved[-1], **options)
    assert_matches_truth(spark, tmp_path / "lake", truth)


def first_range_applied(spark, tmp_path):
    """A sink whose first resolved range is applied: its truth, the tables and versions then, and an orders
    file of the next range (for a test to spoil)."""
    truth = generate_sink(tmp_path / "sink", SinkSpec(**{**SPEC.__dict__, "steps": 12}))
    apply(spark, tmp_path / "sink", tmp_path / "lake", None, truth.resolved[0])
    before = tables(spark, tmp_path / "lake"), versions(spark, tmp_path / "lake")
    victim = next(
        p
        for p in sorted((tmp_path / "sink").rglob("*orders-1.ndjson"))
        if p.name > Hlc.parse(truth.resolved[0]).file_timestamp()
    )
    return truth, before, victim


def test_bad_input_is_refused_naming_file_and_line_and_nothing_is_written(spark, tmp_path):
    truth, before, victim = first_range_applied(spark, tmp_path)
    lines = victim.read_text().splitlines()
    lines[1] = lines[1][:-5]
    victim.write_text("\n".join(lines) + "\n")
    with pytest.raises(FeedCorruptError, match=f"{victim.name}: line 2: malformed JSON"):
        apply(spark, tmp_path / "sink", tmp_path / "lake", truth.resolved[0], truth.resolved[-1])
    assert (tables(spark, tmp_path / "lake"), versions(spark, tmp_path / "lake")) == before
    with pytest.raises(WindowNotReadyError, match="no RESOLVED file at --through-resolved"):
        reading(str(tmp_path / "sink"), None, Hlc.parse(truth.resolved[-1]).__class__(1, 0))


def _submit(*args):
    return subprocess.run(
        ["spark-submit", str(ROOT / "spark_jobs" / "cockroach_changefeed_job.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_spark_submit_contract(tmp_path):
    truth = generate_sink(tmp_path / "sink", SinkSpec(**{**SPEC.__dict__, "steps": 9}))
    summary_file = tmp_path / "summary.json"
    missing = _submit(
        "--sink-root",
        str(tmp_path / "sink"),
        "--target-root",
        str(tmp_path / "lake"),
        "--through-resolved",
        "1.0000000000",
        "--summary-json",
        str(summary_file),
    )
    assert (
        missing.returncode == 2
        and "no RESOLVED file at --through-resolved 1.0000000000" in missing.stdout + missing.stderr
    )
    assert json.loads((tmp_path / "summary.refused.json").read_text())["exitCode"] == 2
    assert not (tmp_path / "lake").exists()
    done = _submit(
        "--sink-root",
        str(tmp_path / "sink"),
        "--target-root",
        str(tmp_path / "lake"),
        "--through-resolved",
        truth.resolved[-1],
        "--summary-json",
        str(summary_file),
    )
    assert done.returncode == 0, done.stdout[-3000:]
    summary = json.loads(summary_file.read_text())
    assert summary["throughResolved"] == truth.resolved[-1] and summary["messagesRead"] == truth.messages
    assert set(summary["topics"]) == {"customers", "orders"}


def test_two_first_loads_at_once_both_exit_0_and_the_tables_equal_the_truth(spark, tmp_path):
    """A first load creates each topic table holding its rows in one commit; two jobs doing it at once
    (a backfill beside a scheduled run) race for the creation: the one that loses merges into the
    winner's table instead (its guard lets nothing through twice), and both exit 0."""
    truth = generate_sink(tmp_path / "sink", SinkSpec(**{**SPEC.__dict__, "steps": 9}))
    args = ["--sink-root", str(tmp_path / "sink"), "--target-root", str(tmp_path / "lake")]
    jobs = [
        subprocess.Popen(
            [
                "spark-submit",
                str(ROOT / "spark_jobs" / "cockroach_changefeed_job.py"),
                *args,
                "--through-resolved",
                through,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for through in (truth.resolved[-1], truth.resolved[-1])
    ]
    outputs = [job.communicate(timeout=600)[0] for job in jobs]
    assert [job.returncode for job in jobs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
    assert_matches_truth(spark, tmp_path / "lake", truth)
    for topic in ("customers", "orders"):
        history = spark.sql(f"DESCRIBE HISTORY delta.`{tmp_path / 'lake' / topic}`").orderBy("version").collect()
        assert history[0]["operation"] == "WRITE"  # the rows came with the table
        assert all(row["operation"] != "WRITE" for row in history[1:])


def test_a_value_that_does_not_fit_its_column_is_refused_naming_file_line_and_column(spark, tmp_path):
    # customer_id is a bigint since the first load; a later line holding text there is refused by name (not
    # Spark's ANSI cast error, which would exit 1 and be retried), and nothing is written.
    truth, before, victim = first_range_applied(spark, tmp_path)
    lines = victim.read_text().splitlines()
    message = json.loads(lines[0])
    message["after"]["customer_id"] = "thirty-four"
    newest = Hlc.parse(truth.resolved[-1])
    message["updated"] = str(Hlc(newest.wall - 1, 0))  # the newest change of its key (the one kept)
    lines[0] = json.dumps(message)
    victim.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        FeedCorruptError,
        match=f"{victim.name}: line 1: the value of column 'customer_id' of topic orders does not fit its type bigint",
    ):
        apply(spark, tmp_path / "sink", tmp_path / "lake", truth.resolved[0], truth.resolved[-1])
    assert (tables(spark, tmp_path / "lake"), versions(spark, tmp_path / "lake")) == before


def test_a_first_load_is_one_commit_and_later_batches_merge(spark, tmp_path):
    truth = generate_sink(tmp_path / "sink", SPEC)
    middle = truth.resolved[len(truth.resolved) // 2]
    first = apply(spark, tmp_path / "sink", tmp_path / "lake", None, middle)
    assert versions(spark, tmp_path / "lake") == {"customers": 0, "orders": 0}
    assert first.inserted > 0 and first.updated == first.deleted == 0
    assert sum(t.inserted for t in first.topics.values()) == first.inserted
    # A second creation (a run that lost the race) is refused, told apart, and writes nothing.
    with pytest.raises(Exception) as refused:
        create_table_with_rows(spark, str(tmp_path / "lake" / "customers"), spark.range(3).toDF("_crdb_key"), {})
    assert created_by_another(refused.value)
    assert versions(spark, tmp_path / "lake") == {"customers": 0, "orders": 0}
    second = apply(spark, tmp_path / "sink", tmp_path / "lake", middle, truth.resolved[-1])
    assert second.updated > 0 and max(versions(spark, tmp_path / "lake").values()) >= 1
    assert_matches_truth(spark, tmp_path / "lake", truth)


def test_a_snapshot_holding_a_topic_it_does_not_name_is_refused_before_any_write(spark, tmp_path):
    # The snapshot's tombstones are made per named topic: rows of another would be applied without them.
    truth = generate_sink(tmp_path / "sink", SinkSpec(steps=3, changes_per_step=10, seed=5, restart_at_flush=None))
    with pytest.raises(FeedCorruptError, match="holds rows of orders, which --snapshot-topics"):
        apply(spark, tmp_path / "sink", tmp_path / "lake", None, truth.resolved[-1], snapshot_topics=["customers"])
    assert not (tmp_path / "lake").exists() or not any((tmp_path / "lake").iterdir())
