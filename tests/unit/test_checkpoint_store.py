"""Compare-and-set checkpoint writes: from the stored value, starting over when the value changed under
the writer. (Writers taking turns, many processes at once: tests/unit/airflow/test_turns.py.)"""

import pytest

from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.errors import CheckpointConflictError
from tests.cells import FileCell


def applied(version, run):
    return lambda cp: cp.moved(applied_version=max(version, cp.applied_version or -1), updated_by=run)


def test_update_writes_from_the_stored_value_and_skips_no_ops(tmp_path):
    store = CheckpointStore(FileCell(tmp_path / "cp.json"), CdfCheckpoint)
    before, after = store.update(applied(3, "r1"))
    assert (before.applied_version, after.applied_version, after.generation) == (None, 3, 1)
    assert store.update(lambda cp: cp) == (after, after)
    assert store.load() == after


def test_a_write_outside_the_lock_makes_the_writer_start_over_from_it(tmp_path):
    cell = FileCell(tmp_path / "cp.json")
    store = CheckpointStore(cell, CdfCheckpoint)
    seen = []

    def change(cp):
        seen.append(cp.applied_version)
        if len(seen) == 1:  # someone edits the Variable by hand between our read and our write
            cell.set(CdfCheckpoint(applied_version=10, generation=7).to_json())
        return cp.moved(applied_version=(cp.applied_version or 0) + 1, updated_by="r")

    _, after = store.update(change)
    assert seen == [None, 10] and (after.applied_version, after.generation) == (11, 8)


def test_a_writer_that_keeps_conflicting_gives_up_without_writing(tmp_path):
    cell = FileCell(tmp_path / "cp.json")
    store = CheckpointStore(cell, CdfCheckpoint)
    counter = iter(range(100, 200))

    def change(cp):
        cell.set(CdfCheckpoint(applied_version=next(counter)).to_json())
        return cp.moved(applied_version=1, updated_by="r")

    with pytest.raises(CheckpointConflictError, match="kept changing.*nothing was written"):
        store.update(change, attempts=3)
    assert store.load().applied_version == 102  # the other writer's last value, not ours
