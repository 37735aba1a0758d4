"""Compare-and-set checkpoint writes: under a real flock, from the stored value, refusing to overwrite a
value changed outside the lock, and never losing an update when many processes write at once."""

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from lakefeed.checkpoint import CdfCheckpoint
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.errors import CheckpointConflictError
from tests.cells import FileCell


def applied(version, run):
    return lambda cp: cp.moved(applied_version=max(version, cp.applied_version or -1), updated_by=run)


def test_update_writes_from_the_stored_value_and_skips_no_ops(tmp_path):
    store = CheckpointStore(FileCell(tmp_path / "cp.json"), CdfCheckpoint, tmp_path / "locks")
    before, after = store.update(applied(3, "r1"))
    assert (before.applied_version, after.applied_version, after.generation) == (None, 3, 1)
    assert store.update(lambda cp: cp) == (after, after)
    assert store.load() == after and store.lock_path.exists()


def test_a_write_outside_the_lock_makes_the_writer_start_over_from_it(tmp_path):
    cell = FileCell(tmp_path / "cp.json")
    store = CheckpointStore(cell, CdfCheckpoint, tmp_path / "locks")
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
    store = CheckpointStore(cell, CdfCheckpoint, tmp_path / "locks")
    counter = iter(range(100, 200))

    def change(cp):
        cell.set(CdfCheckpoint(applied_version=next(counter)).to_json())
        return cp.moved(applied_version=1, updated_by="r")

    with pytest.raises(CheckpointConflictError, match="kept changing.*nothing was written"):
        store.update(change, attempts=3)
    assert store.load().applied_version == 102  # the other writer's last value, not ours


def test_a_held_lock_times_out_without_writing(tmp_path):
    import fcntl

    store = CheckpointStore(FileCell(tmp_path / "cp.json"), CdfCheckpoint, tmp_path / "locks", lock_timeout=0.3)
    store.lock_path.parent.mkdir(parents=True)
    with open(store.lock_path, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(CheckpointConflictError, match="held .* for over 0s"):
            store.update(applied(1, "r"))
    assert store.load().applied_version is None


def _hammer(folder: str, worker: int, rounds: int) -> None:
    store = CheckpointStore(FileCell(Path(folder) / "cp.json"), CdfCheckpoint, Path(folder) / "locks")
    for round_ in range(rounds):
        # Each write records its generation: a lost update would show as two writers with one generation.
        def change(cp, round_=round_):
            log = json.loads(cp.updated_by or "[]")
            return cp.moved(applied_version=(cp.applied_version or 0) + 1,
                            updated_by=json.dumps(log + [[worker, round_, cp.generation + 1]]))
        store.update(change)


def test_many_processes_writing_at_once_lose_no_update(tmp_path):
    workers, rounds = 6, 15
    processes = [multiprocessing.get_context("fork").Process(target=_hammer, args=(str(tmp_path), w, rounds))
                 for w in range(workers)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    final = CheckpointStore(FileCell(tmp_path / "cp.json"), CdfCheckpoint, tmp_path / "locks").load()
    writes = json.loads(final.updated_by)
    assert final.applied_version == final.generation == workers * rounds == len(writes)
    assert [generation for _, _, generation in writes] == list(range(1, workers * rounds + 1))
    assert os.path.exists(tmp_path / "locks" / "cp.lock")
