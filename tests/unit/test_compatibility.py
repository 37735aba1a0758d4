"""What the release before the plan and commit sequences were written once (4df6928) wrote is read, and
continued, alike by this code: its plan documents (an XCom of a run in flight across an upgrade) give the
same job arguments and, committed by this code, the same checkpoint and run summary; its checkpoint
documents are read unchanged and the next run plans as that release planned it. The documents were
recorded by tests/compat/record.py, run against that release, on the same generated feed, sink and source."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.documents import from_document, to_document
from lakefeed.pipeline import BatchesFailed, JobOutputs, RunContext
from tests.cells import FileCell
from tests.compat.record import FEEDS

RECORDED = json.loads((Path(__file__).resolve().parents[1] / "compat" / "4df6928.json").read_text())
SOURCE_ID = re.compile(r'"sourceTableId": "[0-9a-f-]+"|"source_table_id": "[0-9a-f-]+"')


def hooks_of(name: str):
    from importlib import import_module

    return import_module(f"lakefeed.{name}.pipeline").HOOKS


def rooted(document, root: Path):
    return json.loads(json.dumps(document).replace("{root}", str(root)))


def without_source_ids(document) -> str:
    """The CDF source is written anew for the test: its table id differs from the recorded one."""
    text = document if isinstance(document, str) else json.dumps(document, sort_keys=True)
    return SOURCE_ID.sub('"sourceTableId": "-"', text)


def with_source_id(checkpoint: str, config) -> str:
    """The recorded checkpoint, made on the CDF source as written for the test (its table id)."""
    if '"sourceTableId"' not in checkpoint:
        return checkpoint
    from deltalake import DeltaTable

    table_id = DeltaTable(config.pipelines[0].source_table).metadata().id
    return SOURCE_ID.sub(f'"sourceTableId": "{table_id}"', checkpoint)


@pytest.mark.parametrize("name", FEEDS)
def test_a_plan_and_checkpoint_of_the_release_before_are_continued_alike(name, tmp_path):
    dag, kind, variable, source, _ = FEEDS[name]
    root = tmp_path / "root"
    root.mkdir()
    config = source(root)
    recorded = rooted(RECORDED[name], root)
    hooks = hooks_of(name)

    # The plan document of a run in flight: read, it gives the jobs the same arguments.
    planned = from_document(hooks.plan_type, recorded["plan"], "the recorded plan")
    assert hooks.arguments(planned) == recorded["arguments"]

    # Committed by this code, it writes the checkpoint and reports the run as that release did.
    cell = FileCell(root / "checkpoint.json", variable)
    store = CheckpointStore(cell, kind)
    outputs = JobOutputs(summaries={int(i): s for i, s in recorded["summaries"].items()})
    try:
        report = to_document(
            hooks.commit_run(
                planned, {hooks.name(p): store for p in hooks.pipelines_of(config)}, outputs, "scheduled__1"
            )
        )
    except BatchesFailed as failed:
        report = failed.report
    assert json.loads(cell.get()) == json.loads(recorded["checkpoint"])
    assert report == recorded["report"]

    # Its checkpoint document is read unchanged, and the next run plans as that release planned it.
    assert json.loads(kind.from_json(recorded["checkpoint"], variable).to_json()) == json.loads(recorded["checkpoint"])
    checkpoint = kind.from_json(with_source_id(recorded["checkpoint"], config), variable)
    next_plan = hooks.plan_run(
        config,
        {hooks.name(p): checkpoint for p in hooks.pipelines_of(config)},
        {},
        RunContext(dag, "scheduled__2", "scheduled"),
    )
    assert without_source_ids(to_document(next_plan)) == without_source_ids(recorded["nextPlan"])
