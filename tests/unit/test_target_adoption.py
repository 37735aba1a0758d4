"""Who wrote a target's rows, from its Delta log (no JVM): a first run merges only into tables its own
pipeline (its checkpoint Variable, ``pipelineId`` in each commit's ``userMetadata``) wrote, or adopted ones."""

import json

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from lakefeed.errors import CheckpointMismatchError
from lakefeed.targets import foreign_write, tables_under, verify_adoptable


def tag_commits(path, pipeline_id: str) -> None:
    """Rewrite a delta-rs table's commitInfo as this project's jobs tag theirs."""
    for commit in (path / "_delta_log").glob("*.json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        for action in actions:
            if "commitInfo" in action:
                action["commitInfo"]["userMetadata"] = json.dumps({"pipeline": "x", "pipelineId": pipeline_id})
        commit.write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def test_rows_written_by_this_pipeline_pass_and_anyone_elses_are_named(tmp_path):
    ours, theirs = tmp_path / "root" / "ours", tmp_path / "root" / "theirs"
    for path in (ours, theirs):
        write_deltalake(str(path), pa.table({"id": [1, 2]}))
        write_deltalake(str(path), pa.table({"id": [3]}), mode="append")
    tag_commits(ours, "cp_a")
    assert foreign_write(str(ours), "cp_a") is None
    assert foreign_write(str(tmp_path / "nothing"), "cp_a") is None
    assert "written by pipeline cp_a" in foreign_write(str(ours), "cp_b")  # another checkpoint Variable
    assert foreign_write(str(theirs), "cp_a").startswith("version 0 (WRITE) changed its rows, written by another")
    assert sorted(tables_under(str(tmp_path / "root"))) == [str(ours), str(theirs)]
    verify_adoptable([str(ours)], "cp_a", "Variable cp_a", "adopt_targets")
    with pytest.raises(CheckpointMismatchError, match=f"target {theirs} already holds rows.*adopt_targets=true"):
        verify_adoptable([str(ours), str(theirs)], "cp_a", "Variable cp_a", "adopt_targets")


def test_a_history_cleaned_from_the_log_cannot_show_its_writer(tmp_path):
    from deltalake import DeltaTable

    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1]}))
    write_deltalake(str(path), pa.table({"id": [2]}), mode="append")
    tag_commits(path, "cp")
    DeltaTable(str(path)).create_checkpoint()
    (path / "_delta_log" / f"{0:020d}.json").unlink()
    assert "log cleanup" in foreign_write(str(path), "cp")
