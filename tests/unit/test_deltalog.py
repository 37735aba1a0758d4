"""JVM-free Delta log reading on tables written by delta-rs: identity from commits and checkpoints,
RESTOREs, versions committed in a time interval."""

import os
import shutil
import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from lakefeed.deltalog import DeltaLog
from lakefeed.storage import Store


def log_of(path) -> DeltaLog:
    return DeltaLog(Store(str(path)))


def test_table_id_from_commits_then_from_the_checkpoint_after_log_cleanup(tmp_path):
    assert log_of(tmp_path).table_id() is None and log_of(tmp_path).state() is None
    for i in range(4):
        write_deltalake(str(tmp_path), pa.table({"id": [i]}), mode="append")
    expected = DeltaTable(str(tmp_path)).metadata().id
    assert log_of(tmp_path).table_id() == expected
    DeltaTable(str(tmp_path)).create_checkpoint()
    write_deltalake(str(tmp_path), pa.table({"id": [9]}), mode="append")
    for version in range(4):  # log cleanup: only the checkpoint and later commits remain
        os.remove(tmp_path / "_delta_log" / f"{version:020d}.json")
    assert log_of(tmp_path).table_id() == expected
    state = log_of(tmp_path).state()
    assert (state.table_id, state.latest_version, state.restores) == (expected, 4, ())


def test_a_recreated_table_has_a_new_id(tmp_path):
    write_deltalake(str(tmp_path), pa.table({"id": [1]}))
    first = log_of(tmp_path).table_id()
    shutil.rmtree(tmp_path)
    write_deltalake(str(tmp_path), pa.table({"id": [1]}))
    assert log_of(tmp_path).table_id() not in (None, first)


def test_restores_after_a_version_are_reported_with_the_version_restored_to(tmp_path):
    for i in range(3):
        write_deltalake(str(tmp_path), pa.table({"id": [i]}), mode="append")
    DeltaTable(str(tmp_path)).restore(1)
    assert log_of(tmp_path).state(restores_after=2).restores == ((3, 1),)
    assert log_of(tmp_path).state(restores_after=3).restores == ()


def test_versions_committed_in_an_interval(tmp_path):
    stamps = []
    for i in range(5):
        write_deltalake(str(tmp_path), pa.table({"id": [i]}), mode="append")
        stamps.append(log_of(tmp_path).commit_timestamp(i))
        time.sleep(0.02)
    delta_log = log_of(tmp_path)
    assert delta_log.versions_committed_between(stamps[1], stamps[3]) == (1, 2)
    assert delta_log.versions_committed_between(stamps[1], stamps[4] + 1) == (1, 4)
    assert delta_log.versions_committed_between(0, stamps[0]) is None
    assert delta_log.versions_committed_between(stamps[4] + 1, stamps[4] + 10_000) is None


def test_a_deeply_nested_commit_is_named_not_a_crash(tmp_path):
    from lakefeed.deltalog import DeltaLog
    from lakefeed.errors import ChangeDataError
    from lakefeed.storage import Store

    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / f"{0:020d}.json").write_text('{"commitInfo": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    with pytest.raises(ChangeDataError, match=r"00000000000000000000.json: malformed JSON \(nested too deeply\)"):
        DeltaLog(Store(str(tmp_path))).actions(0)


def test_bytes_in_a_key_range_from_the_files_statistics(tmp_path):
    """What a MERGE filtered to a key range still reads: files outside count nothing, integer files their
    overlapping share, text files all of it; a checkpoint changes nothing; no table, 0 bytes."""
    assert log_of(tmp_path).bytes_in_range("id", 0, 9) == 0
    write_deltalake(str(tmp_path), pa.table({"id": list(range(100)), "code": ["a"] * 100}), mode="append")
    write_deltalake(str(tmp_path), pa.table({"id": list(range(1000, 1100)), "code": ["m"] * 100}), mode="append")
    files = pa.table(DeltaTable(str(tmp_path)).get_add_actions(flatten=True)).to_pylist()
    sizes = [f["size_bytes"] for f in files]
    first, second = sorted(files, key=lambda f: f["min.id"])
    log = log_of(tmp_path)
    assert log.bytes_in_range("id", 2000, 3000) == 0
    assert log.bytes_in_range("id", 0, 2000) == sum(sizes)
    assert log.bytes_in_range("id", 50, 99) == first["size_bytes"] // 2  # half of the first file
    assert log.bytes_in_range("code", "b", "z") == second["size_bytes"]  # the "m" file only, all of it
    assert log.bytes_in_range("missing", 0, 1) == sum(sizes)  # no statistics: everything may hold it
    DeltaTable(str(tmp_path)).create_checkpoint()
    assert log.bytes_in_range("id", 0, 2000) == sum(sizes)


def test_commit_infos_after_a_version_read_from_the_commit_files(tmp_path):
    from deltalake import CommitProperties

    assert log_of(tmp_path).commit_infos_after(-1, 100) == []  # no table yet
    for i in range(3):
        write_deltalake(
            str(tmp_path),
            pa.table({"id": list(range(50))}),  # a commit of several actions: commitInfo's line is found among them
            mode="append",
            commit_properties=CommitProperties(custom_metadata={"userMetadata": f'{{"n": {i}}}'}),
        )
    infos = log_of(tmp_path).commit_infos_after(0, 100)
    assert [(version, info["userMetadata"]) for version, info in infos] == [(1, '{"n": 1}'), (2, '{"n": 2}')]
    assert [version for version, _ in log_of(tmp_path).commit_infos_after(-1, 2)] == [0, 1]
    assert log_of(tmp_path).commit_infos_after(2, 100) == []
