"""Lineage: datasets named as OpenLineage names them, whatever spelling the configuration used; what each feed's
plan declares per job and what a job's summary adds (the range applied, counts, versions and figures)."""

from __future__ import annotations

import pytest

from lakefeed.blob import KEY as BLOB
from lakefeed.blob.summary import lineage_outcome as blob_outcome
from lakefeed.cdf import KEY as CDF
from lakefeed.cdf.summary import lineage_outcome as cdf_outcome
from lakefeed.crdb import KEY as COCKROACH
from lakefeed.crdb.summary import lineage_outcome as crdb_outcome
from lakefeed.lineage import (
    DatasetRef,
    Figures,
    JobLineage,
    account_lookup,
    dataset_ref,
    needs_account,
    ref_in,
)

DFS = "abfss://lake@acct.dfs.core.windows.net"


@pytest.mark.parametrize(
    "location",
    [
        "abfss://lake@acct.dfs.core.windows.net/t/events",
        "abfs://lake@acct.dfs.core.windows.net/t/events/",
        "wasbs://lake@acct.blob.core.windows.net/t/events",
        "wasb://lake@acct.blob.core.windows.net/t//events",
        "abfss://lake@acct.dfs.core.windows.net/t/events?sv=2024&sig=secret",
    ],
)
def test_every_azure_spelling_of_a_table_is_one_dataset(location):
    assert dataset_ref(location) == DatasetRef(DFS, "t/events")


def test_an_azure_url_without_an_account_takes_the_connections():
    assert dataset_ref("az://lake/t/events", "acct") == DatasetRef(DFS, "t/events")
    assert dataset_ref("az://lake/t/events") == DatasetRef("abfss://lake", "t/events")
    assert needs_account(["/local", "az://lake/t"]) and not needs_account(["/local", f"{DFS}/t"])


def test_local_paths_and_file_urls_are_absolute_paths_in_the_file_namespace(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert dataset_ref("lake/events/") == DatasetRef("file", f"{tmp_path}/lake/events")
    assert dataset_ref("/data/lake/events") == DatasetRef("file", "/data/lake/events")
    assert dataset_ref("file:///data/lake%20dir/events") == DatasetRef("file", "/data/lake dir/events")
    assert dataset_ref("file:/data/lake/events") == DatasetRef("file", "/data/lake/events")  # Spark's spelling
    assert dataset_ref("s3://bucket/lake/events") == DatasetRef("s3://bucket", "lake/events")
    assert dataset_ref("https://user:pw@host:8443/lake") == DatasetRef("https://host:8443", "lake")


def test_a_job_lineage_survives_its_xcom_document():
    lineage = JobLineage(COCKROACH, "cp", ["/sink"], ["/lake/_quarantine"], "/lake", "acct")
    assert JobLineage.from_dict(lineage.to_dict()) == lineage
    assert lineage.locations == ["/sink", "/lake/_quarantine", "/lake"]


def test_locations_named_without_an_account_take_the_account_of_the_job_that_named_them():
    jobs = [
        JobLineage(CDF, "a", ["az://src/t"], ["az://lake/one/t"], account="one"),
        JobLineage(CDF, "b", ["az://src/u"], ["az://lake/two/t"], account="two"),  # the same container names
        JobLineage(COCKROACH, "c", ["az://sink/s"], [], "az://lake/crdb", account="three"),
        JobLineage(CDF, "d", ["/s"], ["/t"]),
    ]
    accounts = account_lookup(jobs)

    def account(location: str) -> str:
        return ref_in(accounts, location).namespace

    assert account("az://lake/one/t") == "abfss://lake@one.dfs.core.windows.net"
    assert account("az://lake/two/t") == "abfss://lake@two.dfs.core.windows.net"
    assert account("az://lake/crdb/orders") == "abfss://lake@three.dfs.core.windows.net"  # a topic under its root
    assert account("az://sink/s") == "abfss://sink@three.dfs.core.windows.net"
    assert account("az://lake/other") == "abfss://lake"  # three accounts name the container: none is guessed
    assert account("az://sink/other") == "abfss://sink@three.dfs.core.windows.net"  # one account names it
    assert ref_in(accounts, "/t") == DatasetRef("file", "/t")


def test_a_blob_batch_reports_its_windows_chunk_files_and_both_tables():
    lineage = JobLineage(BLOB, "cp", ["/feed"], ["/lake/events", "/lake/state"])
    summary = {
        "windows": ["2026-01-01T00:10:00Z", "2026-01-01T01:10:00Z"],
        "chunkFiles": 4,
        "bytesRead": 1000,
        "recordsRead": 40,
        "eventsInserted": 30,
        "stateInserted": 5,
        "stateUpdated": 7,
        "eventsBytesWritten": 600,
        "stateBytesWritten": 300,
        "lagHours": 1.5,
        "commits": [
            {"table": "file:/lake/events", "version": 3, "token": "t"},
            {"table": "/lake/state", "version": 8, "token": "u"},
            {"table": "/lake/state", "version": 9, "token": "v"},
        ],
    }
    outcome = blob_outcome(lineage, summary)
    assert outcome.applied == {
        "unit": "hour window",
        "windows": summary["windows"],
        "from": "2026-01-01T00:10:00Z",
        "until": "2026-01-01T02:10:00Z",
    }
    assert outcome.inputs == [Figures("/feed", None, 40, 1000, 4)]
    assert outcome.outputs == [Figures("/lake/events", 3, 30, 600), Figures("/lake/state", 9, 12, 300)]
    assert outcome.counts["eventsInserted"] == 30 and outcome.counts["chunkFiles"] == 4
    assert "lagHours" not in outcome.counts and "commits" not in outcome.counts


def test_a_cdf_replay_names_no_version_and_a_full_refresh_replaces_its_target():
    lineage = JobLineage(CDF, "cp", ["/src"], ["/lake/t"])
    replay = {"startingVersion": 2, "endingVersion": 5, "rowsRead": 9, "inserted": 0, "updated": 0, "deleted": 0}
    outcome = cdf_outcome(lineage, replay)
    assert outcome.applied == {"unit": "source version", "from": 2, "through": 5, "mode": "changes", "scdType": 1}
    assert outcome.inputs == [Figures("/src", 5, 9)]
    assert outcome.outputs == [Figures("/lake/t", None, 0, None)]
    refresh = {**replay, "mode": "full-refresh", "inserted": 9, "commits": [{"table": "/lake/t", "version": 0}]}
    assert cdf_outcome(lineage, refresh).outputs == [Figures("/lake/t", 0, 9, None, replaced=True)]


def test_a_cockroach_batch_writes_a_table_per_topic_under_its_root_and_its_quarantine_table():
    lineage = JobLineage(COCKROACH, "cp", ["/sink"], ["/q"], "/lake")
    summary = {
        "afterResolved": "1.0",
        "throughResolved": "2.0",
        "files": 3,
        "messagesRead": 50,
        "bytesRead": 4000,
        "targetRoot": "/abs/lake",
        "topics": {"orders": {"inserted": 4, "updated": 1, "deleted": 2, "bytesWritten": 70}, "users": {}},
        "commits": [
            {"table": "/abs/lake/orders", "version": 6},
            {"table": "/q", "version": 1},
            {"table": "file:/abs/lake/parts", "version": 3},  # tombstone retention only: no message of its own
            {"table": "/abs/lake/_lakefeed_applied_files", "version": 4},  # the job's bookkeeping: not lineage
        ],
    }
    outcome = crdb_outcome(lineage, summary)
    assert outcome.applied == {"unit": "resolved timestamp", "after": "1.0", "through": "2.0"}
    assert outcome.inputs == [Figures("/sink", None, 50, 4000, 3)]
    assert outcome.outputs == [
        Figures("/abs/lake/orders", 6, 7, 70),
        Figures("/abs/lake/users", None, None, None),
        Figures("/q", 1),
        Figures("/abs/lake/parts", 3),
    ]
