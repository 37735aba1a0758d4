"""Commit steps racing on one checkpoint, through real Airflow Variables (a real metadata database):
processes run the CDF commit step's own checkpoint change, scheduled runs and a full refresh at once,
taking turns (lakefeed_airflow.turns) through registers kept in Variables. No update is lost (the generations count every write), no scheduled write moves the checkpoint back or
past unfinished versions, and the full refresh's reset is not undone by a stale writer."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest

from tests.airflow_env import ROOT, dags_test_env, variable

pytestmark = pytest.mark.integration
VARIABLE = "lakefeed_cdf_checkpoint__race"

WRITER = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed.checkpoint_store import CheckpointStore
from lakefeed.cdf.config import CdfConfig, CdfPipeline
from lakefeed.cdf.pipeline import HOOKS
from lakefeed.cdf.run_plan import CdfJob, CdfPlan, PipelinePlan
from lakefeed.pipeline import Credit, PipelinePart
from lakefeed.cdf.summary import CdfSummary
from lakefeed_airflow.settings import VariableCell
from lakefeed_airflow.turns import Ticket, turn

kind, everyone, runs = sys.argv[2], sys.argv[3].split(","), int(sys.argv[4])
pipeline = CdfPipeline(name="race", source_table="/src", target_table="/nonexistent-target", keys=["id"])
config = CdfConfig(pipelines=[pipeline])
store = CheckpointStore(VariableCell("lakefeed_cdf_checkpoint__race", orm=True), CdfCheckpoint)


class VariableRegisters:
    def push(self, ticket):
        VariableCell(f"race_turn__{kind}", orm=True).set(json.dumps(ticket.to_xcom()))

    def others(self):
        return [Ticket.from_xcom(other, json.loads(VariableCell(f"race_turn__{other}", orm=True).get() or "null"))
                for other in everyone if other != kind]


writes = []
for run in range(runs):
    def finished(job):
        return CdfSummary(source="/src", target="/nonexistent-target", mode=job.mode, starting_version=job.first,
                          ending_version=job.last, latest_version=40)

    if kind == "refresh":
        plan = PipelinePlan(kind="reset", origin=None, latest=40, source_table_id="s-1", applied_before=None)
        mine = [(0, CdfJob("race", "full-refresh", version=3))]
        done = {0: finished(mine[0][1])}
    else:
        # ranges of 2 versions up to 40; this run finished those up to a point that grows with each run
        mine = [(i, CdfJob("race", "changes", start=s, end=s + 1)) for i, s in enumerate(range(0, 40, 2))]
        done = {i: finished(job) for i, job in mine[: 2 * run + int(kind[-1])]}
        plan = PipelinePlan(kind="scheduled", origin=0, latest=40, source_table_id="s-1", applied_before=None)
    with turn(VariableRegisters(), kind, poll=0.01):
        planned = CdfPlan(kind=plan.kind, jobs=[job for _, job in mine], pipelines={"race": plan}, config=config)
        part = PipelinePart("race", pipeline, plan.kind, [i for i, _ in mine], None, plan.source_table_id)
        change = HOOKS.change(Credit(planned, part, done, f"{kind}-{run}"), lambda cp: cp.announced)
        before, after = store.update(change)
    VariableRegisters().push(Ticket(kind))  # the step's task instance ends: no longer running
    if after != before:
        writes.append([before.applied_version, after.applied_version, after.generation])
print(json.dumps(writes))
"""


def test_racing_commit_steps_lose_no_update_and_never_undo_a_reset(tmp_path):
    env = dags_test_env(tmp_path / "airflow")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "include"), str(ROOT), env.get("PYTHONPATH", "")])
    kinds = ["scheduled0", "scheduled1", "scheduled2", "refresh"]
    processes = {
        kind: subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(ROOT / "include"),
                kind,
                ",".join(kinds),
                "6" if kind != "refresh" else "3",
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind in kinds
    }
    writes = {}
    for kind, process in processes.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-4000:]
        writes[kind] = json.loads(out.strip().splitlines()[-1])

    final = variable(env, VARIABLE)
    chain = sorted((w for kind in writes for w in writes[kind]), key=lambda w: w[2])
    # Every write got its own generation and started from the value the previous write left: no update
    # was lost, and the stored document is the last write.
    assert [g for _, _, g in chain] == list(range(1, len(chain) + 1)) and final["generation"] == len(chain)
    for (_, after, _), (before_next, _, _) in itertools.pairwise(chain):
        assert before_next == after
    assert final["appliedVersion"] == chain[-1][1]
    # Scheduled writes never move it back; the full refresh sets exactly its version.
    assert all(before is None or after >= before for kind in kinds[:3] for before, after, _ in writes[kind])
    assert writes["refresh"] and all(after == 3 for _, after, _ in writes["refresh"])
