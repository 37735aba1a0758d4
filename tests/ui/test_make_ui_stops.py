"""`make ui` as a user runs it (the Makefile's recipe, from a terminal whose Ctrl-C reaches the foreground
process group): the pipelines and the example downstream DAG (its own bundle) are loaded; then SIGINT to
that group, and every process it started (api-server, scheduler, dag-processor, triggerer, LocalExecutor
workers, log servers) is gone within the stop grace, and the command returns. Standalone alone hung
over its exited children."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest

from tests.airflow_env import ROOT
from tests.fullstack.services import free_port

pytestmark = [pytest.mark.integration]


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, session id) of a process (its title may be rewritten: setproctitle overwrites argv
    and the environment, so neither identifies Airflow's workers)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), int(fields[3])


def _sessions_under(root: int) -> set[int]:
    """The session ids of ``root`` and every process descending from it now."""
    stats = {int(pid): stat for pid in os.listdir("/proc") if pid.isdigit() and (stat := _stat(pid))}
    family, grown = {root}, True
    while grown:
        grown = False
        for pid, (parent, _) in stats.items():
            if parent in family and pid not in family:
                family.add(pid)
                grown = True
    return {stats[pid][1] for pid in family if pid in stats}


def _alive_in(sessions: set[int]) -> list[int]:
    """Processes (not zombies) in those sessions: what a stop leaves behind, whoever adopted it."""
    alive = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or not (stat := _stat(pid)) or stat[1] not in sessions:
            continue
        try:
            with open(f"/proc/{pid}/stat") as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(int(pid))
        except OSError:
            continue
    return alive


def test_ctrl_c_on_make_ui_stops_every_airflow_process(tmp_path):
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
    }
    log = open(tmp_path / "ui.log", "w")
    # A terminal's foreground job: its own process group, SIGINT at its default (a background job of a
    # non-interactive shell would start with SIGINT ignored, which no trap can undo).
    ui = subprocess.Popen(
        ["make", "-s", "ui"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    sessions: set[int] = set()
    try:
        deadline = time.monotonic() + 240
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert ui.poll() is None, (tmp_path / "ui.log").read_text()[-4000:]
            assert time.monotonic() < deadline, "the api-server did not come up"
            time.sleep(2)
        # The example downstream DAG is loaded as shipped, from its own bundle, beside the pipelines.
        while True:
            listed = subprocess.run(
                ["airflow", "dags", "list", "-o", "json", "--columns", "dag_id,bundle_name"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            rows = [line for line in listed.stdout.splitlines() if line.startswith("[")]  # after any warnings
            found = {d["dag_id"]: d["bundle_name"] for d in json.loads(rows[-1])} if rows else {}
            if "lakefeed_events_downstream" in found and "blob_changefeed_to_delta" in found:
                break
            assert time.monotonic() < deadline + 120, listed.stdout[-2000:] + listed.stderr[-2000:]
            time.sleep(3)
        assert (
            found["lakefeed_events_downstream"] == "lakefeed-examples"
            and found["blob_changefeed_to_delta"] == "dags-folder"
        )
        sessions = _sessions_under(ui.pid)
        started = _alive_in(sessions)
        assert len(sessions) == 2 and len(started) >= 8, (sessions, started)  # make's, standalone's own

        os.killpg(ui.pid, signal.SIGINT)  # Ctrl-C
        stopped_at = time.monotonic()
        ui.wait(timeout=60)
        while _alive_in(sessions) and time.monotonic() - stopped_at < 60:
            time.sleep(0.5)
        elapsed = time.monotonic() - stopped_at
        assert not _alive_in(sessions), f"left running: {_alive_in(sessions)}"
        assert elapsed < 40, f"stopping took {elapsed:.0f} s"
        assert "lakefeed ui: stopped" in (tmp_path / "ui.log").read_text()
    finally:
        for pid in _alive_in(sessions | _sessions_under(ui.pid)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
