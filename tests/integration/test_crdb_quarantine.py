"""The CockroachDB job's quarantine table (``--quarantine-table``) with real Spark and real Delta: a sink whose
files mix the changefeed's messages with lines that are not messages (bad JSON, no key, no after, a key that
is not an array, not an object, an unreadable updated, bytes that are not UTF-8). The quarantine table holds
exactly those lines, the topic tables exactly the messages, also after the range is applied again; a line
that says the changefeed itself is misconfigured is still refused (issue 25)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.crdb import APPLIED_FILES_TABLE
from lakefeed.errors import FeedCorruptError
from tests.integration.test_crdb_job import SPEC, apply, assert_matches_truth, tables, versions

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
UPDATED = "1700000000000000000.0000000000"
# Lines that are not messages, each with what its reason says.
BAD_LINES = [
    (b'{"after": {"id": 1}, "key": [1], "updated": "17000', "malformed JSON"),
    (b'{"after": {"id": 1}, "updated": "' + UPDATED.encode() + b'"}', "a message without key"),
    (b'{"key": [1], "updated": "' + UPDATED.encode() + b'"}', "a message without after"),
    (b'{"after": {"id": 1}, "key": 5, "updated": "' + UPDATED.encode() + b'"}', "key must be a JSON array"),
    (b"[1, 2, 3]", "a changefeed message must be a JSON object"),
    (b'{"after": null, "key": [1], "updated": "yesterday"}', "yesterday"),
    (b'\xff\xfe{"after": null}', "malformed JSON"),
]


def spoil(sink: Path, seed: int) -> dict[tuple[str, int], tuple[str, str]]:
    """Insert every bad line into data files of both topics, at the start, inside and at the end of a file;
    returns {(file path relative to the sink, line): (raw, reason fragment)}."""
    rng = random.Random(seed)
    files = sorted(p for p in sink.rglob("*.ndjson") if "customers" in p.name or "orders" in p.name)
    victims = rng.sample(files, 3)
    expected = {}
    for index, (line, reason) in enumerate(BAD_LINES):
        victim = victims[index % len(victims)]
        lines = victim.read_bytes().split(b"\n")[:-1]
        at = [0, len(lines) // 2, len(lines)][index % 3]
        lines.insert(at, line)
        victim.write_bytes(b"\n".join(lines) + b"\n")
        # lines after the insertion point moved down by one
        moved = {}
        for (name, number), value in expected.items():
            moved[(name, number + 1 if name == str(victim.relative_to(sink)) and number >= at + 1 else number)] = value
        expected = moved
        expected[(str(victim.relative_to(sink)), at + 1)] = (line.decode("utf-8", errors="replace"), reason)
    return expected


def quarantined(spark, table: Path, sink: Path) -> dict[tuple[str, int], tuple[str, str]]:
    rows = spark.read.format("delta").load(str(table)).collect()
    found = {}
    for row in rows:
        relative = row["source_file"].split(str(sink).rstrip("/") + "/", 1)[1]
        assert (relative, row["line"]) not in found
        found[(relative, row["line"])] = (row["raw"], row["reason"])
    return found


def assert_quarantine_holds_exactly(spark, table, sink, expected):
    found = quarantined(spark, table, sink)
    assert set(found) == set(expected)
    for place, (raw, reason) in expected.items():
        assert found[place][0] == raw
        assert reason in found[place][1], (place, found[place][1])
        assert ".ndjson" not in found[place][1]  # the row names the file: the reason does not repeat it


def test_bad_lines_go_to_the_quarantine_table_and_the_messages_to_the_topics_also_on_replay(spark, tmp_path):
    sink, lake, table = tmp_path / "sink", tmp_path / "lake", tmp_path / "quarantine"
    truth = generate_sink(sink, SinkSpec(**{**SPEC.__dict__, "steps": 15}))
    expected = spoil(sink, seed=3)
    middle = truth.resolved[len(truth.resolved) // 2]
    first = apply(spark, sink, lake, None, middle, quarantine_table=str(table))
    second = apply(spark, sink, lake, middle, truth.resolved[-1], quarantine_table=str(table))
    assert first.quarantined + second.quarantined == len(expected) == len(BAD_LINES)
    assert first.messages_read + second.messages_read == truth.messages
    assert_matches_truth(spark, lake, truth)
    assert_quarantine_holds_exactly(spark, table, sink, expected)

    # The whole range again with the applied-files ledger gone: every file is read again, and neither the
    # quarantine table nor the topics gain a row.
    before = tables(spark, lake), versions(spark, lake)
    quarantine_version = spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()[0]["version"]
    shutil.rmtree(lake / APPLIED_FILES_TABLE)
    again = apply(spark, sink, lake, None, truth.resolved[-1], quarantine_table=str(table))
    assert again.quarantined == len(expected) and again.messages_read == truth.messages
    assert (tables(spark, lake), versions(spark, lake)) == before
    assert spark.sql(f"DESCRIBE HISTORY delta.`{table}`").collect()[0]["version"] == quarantine_version
    assert_quarantine_holds_exactly(spark, table, sink, expected)


def test_without_the_flag_a_bad_line_is_refused_and_a_misconfigured_feed_is_refused_with_it(spark, tmp_path):
    sink, lake, table = tmp_path / "sink", tmp_path / "lake", tmp_path / "quarantine"
    truth = generate_sink(sink, SinkSpec(**{**SPEC.__dict__, "steps": 6}))
    victim = sorted(p for p in sink.rglob("*.ndjson") if "orders" in p.name)[-1]
    victim.write_bytes(victim.read_bytes() + BAD_LINES[2][0] + b"\n")
    with pytest.raises(FeedCorruptError, match=f"{victim.name}: line \\d+: a message without after"):
        apply(spark, sink, lake, None, truth.resolved[-1])
    assert not lake.exists()
    # More lines set aside than messages read: a feed this reader misreads (key_in_value off, say), refused
    # rather than set aside whole by a green run.
    victim.write_bytes(victim.read_bytes() + (BAD_LINES[1][0] + b"\n") * truth.messages)
    with pytest.raises(FeedCorruptError, match=r"line\(s\) of this range are not changefeed messages, more than"):
        apply(spark, sink, lake, None, truth.resolved[-1], quarantine_table=str(table))
    assert not lake.exists() and not table.exists()
    # A line without updated says the changefeed was created without it: refused, quarantine or not.
    victim.write_bytes(victim.read_bytes() + b'{"after": {"id": 1}, "key": [1]}\n')
    with pytest.raises(FeedCorruptError, match="without updated"):
        apply(spark, sink, lake, None, truth.resolved[-1], quarantine_table=str(table))
    assert not lake.exists() and not table.exists()


def test_spark_submit_quarantine_table_contract(tmp_path):
    sink, lake, table = tmp_path / "sink", tmp_path / "lake", tmp_path / "quarantine"
    truth = generate_sink(sink, SinkSpec(**{**SPEC.__dict__, "steps": 6}))
    expected = spoil(sink, seed=5)
    summary_file = tmp_path / "summary.json"
    done = subprocess.run(
        [
            "spark-submit",
            str(ROOT / "spark_jobs" / "cockroach_changefeed_job.py"),
            "--sink-root",
            str(sink),
            "--target-root",
            str(lake),
            "--through-resolved",
            truth.resolved[-1],
            "--quarantine-table",
            str(table),
            "--summary-json",
            str(summary_file),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads(summary_file.read_text())
    assert (summary["quarantined"], summary["messagesRead"]) == (len(expected), truth.messages)
    assert str(table) in {c["table"] for c in summary["commits"]}
