"""The pipelines in the Airflow UI, through real parts: an api-server and scheduler (SQLite metadata,
LocalExecutor, this project's DAGs and plugins plus the example downstream DAG), real `airflow dags test`
runs of the blob and CDF DAGs on local Spark, and Debian's chromium driven by Playwright.

- The blob run's commit task emits asset events; the example DAG scheduled on the events table's asset
  is then run by the scheduler, with the event's extra (windows, rows, version).
- The monitor API refuses requests without a valid Airflow login; the page, reached from the navigation,
  shows the checkpoints, source positions and the run summaries' figures.
- The backfill forms of the three DAGs are filled and submitted in the trigger dialog; the runs exist with
  that conf.
- With the blob DAG unpaused and its scheduled run waiting for new data, a backfill submitted from the
  form starts within a minute beside it.

Screenshots land in ``$LAKEFEED_TEST_ARTIFACTS/ui`` (default ``data/test-artifacts/ui``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from lakefeed_testing.blob_generator import FeedSpec, generate_feed
from lakefeed_testing.cdf_simulator import SourceSimulator, create_source
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.assets import table_uri
from lakefeed.blob.timegrid import HOUR
from lakefeed.times import format_time
from tests.airflow_env import ROOT, dags_test, dags_test_env, last_run_id, variable, wait_for, xcom
from tests.fullstack.services import airflow, airflow_services, free_port

pytestmark = [pytest.mark.integration]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
USER, PASSWORD = "admin", "ui-test-password"
CDF_VIEWER = "cdf_viewer"  # may read the CDF DAG only (tests/ui/auth_manager.py)
BLOB, CDF, DOWNSTREAM = "blob_changefeed_to_delta", "delta_cdf_to_delta", "lakefeed_events_downstream"
CRDB = "cockroach_changefeed_to_delta"
AFTER_RESOLVED, THROUGH_RESOLVED = "1773482400000000000.0000000000", "1773482700000000000.0000000000"
SPEC = FeedSpec(hours=2, events_per_hour=300, shards=2, records_per_chunk=200, seed=14)


def artefacts() -> Path:
    folder = Path(os.environ.get("LAKEFEED_TEST_ARTIFACTS", ROOT / "data" / "test-artifacts")) / "ui"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def number(value) -> str:
    """A figure as the page prints it (JSON has no integer floats: 2.0 arrives as 2)."""
    if value is None:
        return "–"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.2f}"


class Api:
    def __init__(self, port: int):
        self.base = f"http://127.0.0.1:{port}"
        self.token = None

    def call(self, path: str, token: str | None = None, body: dict | None = None) -> tuple[int, dict | str]:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.base + path, headers=headers, data=json.dumps(body).encode() if body is not None else None
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                text = response.read().decode()
                status = response.status
        except urllib.error.HTTPError as exc:
            text, status = exc.read().decode(), exc.code
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def login(self, user: str = USER) -> str:
        status, body = self.call("/auth/token", body={"username": user, "password": PASSWORD})
        assert status in (200, 201), body
        return body["access_token"]

    def runs(self, token: str, dag_id: str) -> list[dict]:
        status, body = self.call(f"/api/v2/dags/{dag_id}/dagRuns?limit=100", token)
        assert status == 200, body
        return body["dag_runs"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, spark):
    """Feed, CDF source, Airflow metadata with the DAGs serialized, the api-server and the scheduler."""
    folder = tmp_path_factory.mktemp("ui")
    truth = generate_feed(folder / "feed", SPEC)
    create_source(spark, str(folder / "source"), rows=25)
    simulator = SourceSimulator(spark, str(folder / "source"), seed=3, key_space=60)
    for kind in ("update", "delete", "merge"):
        simulator.commit(kind)

    dags = folder / "dags"
    dags.mkdir()
    for dag_file in [*(ROOT / "dags").glob("*.py"), ROOT / "include" / "examples" / "events_downstream_dag.py"]:
        (dags / dag_file.name).symlink_to(dag_file)
    passwords = folder / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD, CDF_VIEWER: PASSWORD}))
    port = free_port()
    blob_config = {
        "feed_root": str(folder / "feed"),
        "events_table": str(folder / "lake" / "events"),
        "state_table": str(folder / "lake" / "state"),
        "sensor_poke_seconds": 1,
        "sensor_timeout_seconds": 5,
    }
    sink_truth = generate_sink(folder / "sink", SinkSpec(steps=12, changes_per_step=10, seed=5))
    crdb_config = {
        "sink_root": str(folder / "sink"),
        "target_root": str(folder / "lake" / "crdb"),
        "sensor_poke_seconds": 1,
        "sensor_timeout_seconds": 5,
    }
    cdf_config = {
        "pipelines": [
            {
                "name": "orders",
                "source_table": str(folder / "source"),
                "target_table": str(folder / "lake" / "orders"),
                "keys": ["id"],
            }
        ],
        "sensor_poke_seconds": 1,
        "sensor_timeout_seconds": 5,
    }
    env = dags_test_env(
        folder / "airflow",
        AIRFLOW__CORE__DAGS_FOLDER=str(dags),
        AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="True",
        AIRFLOW__CORE__EXECUTOR="LocalExecutor",
        AIRFLOW__CORE__AUTH_MANAGER="tests.ui.auth_manager.DagGrantsAuthManager",
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=f"{USER}:admin,{CDF_VIEWER}:viewer",
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=str(passwords),
        AIRFLOW__API_AUTH__JWT_SECRET="ui-test-only-jwt-secret",
        AIRFLOW__CORE__EXECUTION_API_SERVER_URL=f"http://127.0.0.1:{port}/execution/",
        AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC="2",
        LAKEFEED_TEST_API_PORT=str(port),
        LAKEFEED_EVENTS_ASSET=table_uri(blob_config["events_table"]),
        AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG=json.dumps(blob_config),
        AIRFLOW_VAR_LAKEFEED_CDF_CONFIG=json.dumps(cdf_config),
        AIRFLOW_VAR_LAKEFEED_CRDB_CONFIG=json.dumps(crdb_config),
    )
    airflow(env, "pools", "set", "lakefeed_spark", "1", "spark jobs")
    airflow(env, "pools", "set", "lakefeed_checkpoints", "1", "checkpoint writers")
    airflow(env, "dags", "reserialize")
    airflow(env, "dags", "unpause", DOWNSTREAM)  # the pipelines stay paused: only the tests start their runs
    with airflow_services(folder, env, components=("scheduler",)):
        yield {
            "env": env,
            "api": Api(port),
            "folder": folder,
            "blob": blob_config,
            "cdf": cdf_config,
            "truth": truth,
            "sink_truth": sink_truth,
        }


@pytest.fixture(scope="module")
def ran(stack):
    """A blob run and a CDF run through `airflow dags test`, as a user's first scheduled runs."""
    env = stack["env"]
    dags_test(env, BLOB)
    blob_run = last_run_id(env, BLOB)
    dags_test(env, CDF)
    cdf_run = last_run_id(env, CDF)
    return {
        "blob": (blob_run, xcom(env, BLOB, blob_run, "commit_checkpoint")),
        "cdf": (cdf_run, xcom(env, CDF, cdf_run, "commit_checkpoints")),
    }


def test_the_downstream_dag_runs_on_the_events_tables_asset_event(stack, ran):
    _, report = ran["blob"]
    [events] = [c for c in report["targetsChanged"] if c["table"] == stack["blob"]["events_table"]]
    assert events["extra"]["rowsInserted"] == report["eventsInserted"] > 0
    assert events["extra"]["windows"] == [format_time(w) for w in stack["truth"].ready_windows()]

    api = stack["api"]
    token = api.login()
    runs = wait_for(
        lambda: [r for r in api.runs(token, DOWNSTREAM) if r["state"] in ("success", "failed")],
        180,
        "the scheduler to run the downstream DAG on the asset event",
    )
    assert [r["state"] for r in runs] == ["success"], runs
    assert runs[0]["run_type"] == "asset_triggered"
    applied = xcom(stack["env"], DOWNSTREAM, runs[0]["dag_run_id"], "new_events")
    assert applied == [events["extra"]]


def test_each_changed_target_gets_one_asset_event_with_what_was_applied(stack, ran):
    """Both DAGs' commit tasks emitted one event per changed table, with the run summary's figures."""
    with sqlite3.connect(Path(stack["env"]["AIRFLOW_HOME"]) / "airflow.db") as db:
        events = db.execute(
            "SELECT asset.uri, asset_event.extra, asset_event.source_dag_id FROM asset_event "
            "JOIN asset ON asset.id = asset_event.asset_id"
        ).fetchall()
    emitted = sorted((uri, json.loads(extra), dag_id) for uri, extra, dag_id in events)
    expected = sorted(
        (change["uri"], change["extra"], dag_id)
        for dag_id, (_, report) in ((BLOB, ran["blob"]), (CDF, ran["cdf"]))
        for change in report["targetsChanged"]
    )
    assert emitted == expected
    assert {uri for uri, _, _ in emitted} == {
        table_uri(stack["blob"]["events_table"]),
        table_uri(stack["blob"]["state_table"]),
        table_uri(stack["cdf"]["pipelines"][0]["target_table"]),
    }
    [orders] = [extra for uri, extra, _ in emitted if uri.endswith("/orders")]
    assert orders["rowsInserted"] == ran["cdf"][1]["pipelines"]["orders"]["inserted"] > 0
    assert orders["versions"] == [[0, ran["cdf"][1]["pipelines"]["orders"]["appliedVersion"]]]


def test_the_monitor_api_refuses_requests_without_a_login(stack):
    api = stack["api"]
    for path in ("/lakefeed/api/pipelines", "/lakefeed/"):
        assert api.call(path)[0] == 401
        assert api.call(path, token="not-a-token")[0] in (401, 403)
    status, body = api.call("/lakefeed/api/pipelines", api.login())
    assert status == 200 and {p["key"] for p in body["pipelines"]} >= {"blob", "cdf:orders", "cockroach"}
    text = json.dumps(body)
    assert PASSWORD not in text and "ui-test-only-jwt-secret" not in text


def test_the_monitor_shows_a_user_only_the_pipelines_of_dags_they_may_read(stack):
    api = stack["api"]
    token = api.login(CDF_VIEWER)
    assert api.call(f"/api/v2/dags/{BLOB}/dagRuns", token)[0] == 403  # the grant, as the core API applies it
    status, body = api.call("/lakefeed/api/pipelines", token)
    assert status == 200, body
    assert [(p["key"], p["dagId"]) for p in body["pipelines"]] == [("cdf:orders", CDF)]
    assert stack["blob"]["feed_root"] not in json.dumps(body)


def test_the_monitor_page_shows_the_run_summaries(stack, ran):
    from playwright.sync_api import sync_playwright

    env, api = stack["env"], stack["api"]
    blob_run, blob_report = ran["blob"]
    cdf_run, cdf_report = ran["cdf"]
    orders = cdf_report["pipelines"]["orders"]
    blob_checkpoint = variable(env, "lakefeed_blob_checkpoint")
    with sync_playwright() as playwright:
        browser, page = open_browser(playwright, width=1500)
        log_in(page, api.base)
        # Reached from the navigation: Browse → Lakefeed pipelines.
        page.get_by_role("button", name="Browse").click()
        page.get_by_role("menuitem", name="Lakefeed pipelines").click()
        # The UI mirrors the iframe's own path into its URL once the page loads (/plugin/lakefeed becomes
        # /plugin/lakefeed/lakefeed/, a deep link): either may be current when this looks.
        page.wait_for_url(re.compile(re.escape(f"{api.base}/plugin/lakefeed") + r"(/.*)?$"))
        monitor = page.frame_locator("iframe")
        monitor.locator("body[data-loaded=true]").wait_for()

        def figure(testid: str) -> str:
            return monitor.locator(f"[data-testid={testid}] .value").inner_text().strip()

        def cell(card: str, run_id: str, column: str) -> str:
            return (
                monitor.locator(f"[data-testid=runs-{card}] tr[data-run-id='{run_id}'] td[data-col={column}]")
                .inner_text()
                .strip()
            )

        assert figure("checkpoint-blob") == blob_checkpoint["watermark"] == blob_report["watermark"]
        assert figure("source-blob") == blob_report["lastConsumable"]
        assert figure("lag-blob") == number(blob_report["lagHours"])
        for column, key in (
            ("read", "recordsRead"),
            ("claimed", "eventsClaimed"),
            ("strays", "strays"),
            ("duplicates", "duplicatesRemoved"),
            ("updated", "stateUpdated"),
        ):
            assert cell("blob", blob_run, column) == number(blob_report[key]), column
        assert cell("blob", blob_run, "inserted") == number(
            blob_report["eventsInserted"] + blob_report["stateInserted"]
        )
        assert cell("blob", blob_run, "outcome") == "applied"
        assert monitor.locator("[data-testid=health-blob]").get_attribute("data-status") == "healthy"

        assert figure("checkpoint-cdf\\:orders") == number(orders["appliedVersion"])
        assert figure("source-cdf\\:orders") == number(orders["latestVersion"])
        assert figure("lag-cdf\\:orders") == number(orders["lagVersions"])
        for column in ("inserted", "updated", "deleted"):
            assert cell("cdf\\:orders", cdf_run, column) == number(orders[column]), column
        assert monitor.locator("[data-testid=lag-chart-blob]").get_attribute("data-points") == "1"
        # Charts have axes: the unit, ticks up to the maximum, the run's start time.
        throughput = monitor.locator("[data-testid=throughput-chart-blob]")
        assert "rows read / Spark s" in throughput.text_content() and "run start (UTC)" in throughput.text_content()
        assert re.fullmatch(r"\d\d-\d\d \d\d:\d\d", throughput.locator("[data-tick=x]").first.text_content())
        assert throughput.locator("[data-tick=y]").last.text_content() != "0"
        monitor.locator("[data-testid=card-cockroach]").wait_for()
        page.screenshot(path=str(artefacts() / "monitor.png"), full_page=True)

        # The address the UI settled on is a link a user can bookmark: opened afresh, it shows the page.
        page.goto(page.url)
        monitor.locator("body[data-loaded=true]").wait_for()
        assert figure("checkpoint-blob") == blob_report["watermark"]
        browser.close()


def test_the_monitor_tells_a_refused_backfill_from_a_failing_pipeline(stack, ran):
    """A blob backfill of windows the feed has not reached is refused by its plan: the card stays healthy,
    with a note, the reason in words and what to do. A CDF run whose source table is gone fails its
    sensor: the card says the pipeline is failing, naming the table. On a laptop-sized screen each runs
    table fits its card."""
    from playwright.sync_api import sync_playwright

    env, api = stack["env"], stack["api"]
    beyond = SPEC.last_consumable + 5 * HOUR
    dags_test(
        env, BLOB, conf={"window_start": format_time(beyond), "window_end": format_time(beyond + HOUR)}, succeed=False
    )
    refused_run = last_run_id(env, BLOB)
    gone = str(stack["folder"] / "no-such-source")
    broken = {**stack["cdf"], "pipelines": [{**stack["cdf"]["pipelines"][0], "source_table": gone}]}
    dags_test({**env, "AIRFLOW_VAR_LAKEFEED_CDF_CONFIG": json.dumps(broken)}, CDF, succeed=False)
    failing_run = last_run_id(env, CDF)

    _status, body = api.call("/lakefeed/api/pipelines", api.login())
    cards = {card["key"]: card for card in body["pipelines"]}
    blob, orders = cards["blob"], cards["cdf:orders"]
    assert blob["health"]["status"] == "healthy" and blob["health"]["backfillRun"] == refused_run
    [refused] = [r for r in blob["runs"] if r["runId"] == refused_run]
    assert (refused["outcome"], refused["purpose"], refused["reason"]["kind"]) == ("refused", "backfill", "not ready")
    assert refused["reason"]["task"] == "plan_windows" and refused["reason"]["error"] == "WindowNotReadyError"
    assert orders["health"]["status"] == "failing" and orders["health"]["run"] == failing_run
    assert (
        orders["health"]["reason"]["task"] == "wait_for_new_versions" and gone in orders["health"]["reason"]["message"]
    )
    assert sum(orders["health"]["counts"].values()) == orders["health"]["shown"] == len(orders["runs"])

    with sync_playwright() as playwright:
        browser, page = open_browser(playwright, width=1280, height=800)
        log_in(page, api.base)
        page.goto(f"{api.base}/plugin/lakefeed")
        monitor = page.frame_locator("iframe")
        monitor.locator("body[data-loaded=true]").wait_for()
        note = monitor.locator("[data-testid=backfill-note-blob]")
        assert "was refused: not ready" in note.inner_text() and "Trigger it again" in note.inner_text()
        assert monitor.locator("[data-testid=health-blob] .status").inner_text() == "Healthy"
        why = monitor.locator(f"[data-testid=runs-blob] tr[data-reason-for='{refused_run}']").inner_text()
        assert "WindowNotReadyError (not ready)" in why and "What to do:" in why
        failing = monitor.locator("[data-testid=health-cdf\\:orders]")
        assert failing.get_attribute("data-status") == "failing"
        assert failing.locator(".status").inner_text() == "Failing" and gone in failing.inner_text()
        assert "What to do:" in failing.inner_text()
        for key in ("blob", "cdf\\:orders"):
            overflow = monitor.locator(f"[data-testid=runs-{key}]").evaluate(
                "t => t.scrollWidth - t.closest('section').clientWidth"
            )
            assert overflow <= 0, f"the runs table of {key} is {overflow} px wider than its card"
        page.screenshot(path=str(artefacts() / "monitor-reasons.png"), full_page=True)
        browser.close()


def test_the_backfill_forms_create_runs_with_their_conf(stack, ran):
    from playwright.sync_api import sync_playwright

    api = stack["api"]
    window_start, window_end = format_time(SPEC.start), format_time(SPEC.last_consumable)
    with sync_playwright() as playwright:
        browser, page = open_browser(playwright, width=1400)
        log_in(page, api.base)

        form = open_trigger_form(page, api.base, BLOB)
        form.get_by_text("Backfill from (window start)").wait_for()
        form.locator("[name=element_window_start]").fill(window_start)
        form.locator("[name=element_window_end]").fill(window_end)
        page.screenshot(path=str(artefacts() / "blob-backfill-form.png"), full_page=True)
        submit_trigger_form(form)

        form = open_trigger_form(page, api.base, CDF)
        form.get_by_text("Pipeline", exact=True).wait_for()
        form.locator("[name=element_pipeline]").fill("orders")
        form.locator("[name=element_starting_version]").fill("1")
        form.locator("[name=element_ending_version]").fill("2")
        page.screenshot(path=str(artefacts() / "cdf-backfill-form.png"), full_page=True)
        submit_trigger_form(form)

        form = open_trigger_form(page, api.base, CRDB)
        form.get_by_text("Backfill through (RESOLVED)").wait_for()
        form.locator("[name=element_after_resolved]").fill(AFTER_RESOLVED)
        form.locator("[name=element_through_resolved]").fill(THROUGH_RESOLVED)
        submit_trigger_form(form)
        browser.close()

    token = api.login()
    blob_runs = wait_for(
        lambda: [r for r in api.runs(token, BLOB) if (r.get("conf") or {}).get("window_start") == window_start],
        60,
        "the blob backfill run",
    )
    assert blob_runs[0]["conf"] == {
        "window_start": window_start,
        "window_end": window_end,
        "reset_checkpoint": False,
        "acknowledge_data_loss": False,
        "adopt_targets": False,
    }
    cdf_runs = wait_for(
        lambda: [r for r in api.runs(token, CDF) if (r.get("conf") or {}).get("pipeline")], 60, "the CDF backfill run"
    )
    assert cdf_runs[0]["conf"] == {
        "pipeline": "orders",
        "starting_version": 1,
        "ending_version": 2,
        "full_refresh": False,
        "adopt_targets": False,
    }
    for dag_id in (BLOB, CDF, CRDB):
        assert api.call(f"/api/v2/dags/{dag_id}", token)[1]["is_paused"] is True, dag_id
    crdb_runs = wait_for(
        lambda: [r for r in api.runs(token, CRDB) if (r.get("conf") or {}).get("after_resolved")],
        60,
        "the CockroachDB backfill run",
    )
    assert crdb_runs[0]["conf"] == {
        "after_resolved": AFTER_RESOLVED,
        "through_resolved": THROUGH_RESOLVED,
        "reset_checkpoint": False,
        "adopt_targets": False,
    }


REFUSED_FORMS = [
    (
        BLOB,
        {"window_start": "2026-02-31T00:10:00Z", "window_end": "2026-03-01T00:10:00Z"},
        "window_start 2026-02-31T00:10:00Z is not a real date: February 2026 has 28 days.",
    ),
    (
        BLOB,
        {"window_start": "2026-01-01T00:15:00Z", "window_end": "2026-01-01T01:10:00Z"},
        "its windows start at minute 10 of every hour, so the nearest are 2026-01-01T00:10:00Z and 2026-01-01T01:10:00Z",
    ),
    (
        BLOB,
        {"window_start": "2026-01-01T02:10:00Z", "window_end": "2026-01-01T01:10:00Z"},
        "window_end 2026-01-01T01:10:00Z must be after window_start 2026-01-01T02:10:00Z",
    ),
    (
        CDF,
        {"starting_version": "-1", "ending_version": "2"},
        "starting_version -1 is negative: Delta versions start at 0.",
    ),
    (CDF, {"starting_version": "5", "ending_version": "2"}, "ending_version 2 is before starting_version 5"),
    (CDF, {"pipeline": "order"}, "pipeline 'order' is not configured: choose one of orders."),
    (CRDB, {"after_resolved": AFTER_RESOLVED}, "A backfill needs through_resolved"),
    (
        CRDB,
        {"after_resolved": "yesterday", "through_resolved": THROUGH_RESOLVED},
        "after_resolved 'yesterday' is not a RESOLVED timestamp",
    ),
]


def test_each_bad_form_value_is_refused_in_a_sentence_before_a_run_exists(stack, ran):
    """Filled in the trigger dialog and submitted: the dialog stays open and shows the sentence (no regular
    expression); no run is created. The CDF form keeps -1 as typed (no silent clamp to 0)."""
    from playwright.sync_api import sync_playwright

    api = stack["api"]
    token = api.login()
    before = {dag_id: len(api.runs(token, dag_id)) for dag_id in (BLOB, CDF, CRDB)}
    with sync_playwright() as playwright:
        browser, page = open_browser(playwright, width=1400)
        log_in(page, api.base)
        for number, (dag_id, values, sentence) in enumerate(REFUSED_FORMS):
            form = open_trigger_form(page, api.base, dag_id)
            for name, value in values.items():
                field = form.locator(f"[name=element_{name}]")
                field.fill(value)
                field.blur()
                assert field.input_value() == value, (name, field.input_value())
            form.get_by_role("button", name="Trigger").click()
            form.get_by_text(sentence, exact=False).wait_for()
            assert "[0-9]" not in form.inner_text() and "does not match" not in form.inner_text()
            page.screenshot(path=str(artefacts() / f"refused-form-{number}.png"), full_page=True)
        browser.close()
    assert {dag_id: len(api.runs(token, dag_id)) for dag_id in (BLOB, CDF, CRDB)} == before


def test_a_backfill_from_the_form_starts_at_once_while_a_scheduled_run_waits(stack, ran):
    """The blob DAG unpaused with everything applied: its scheduled run finds no window ready and waits
    (deferred). A backfill submitted from the trigger form meanwhile is running within a minute, beside
    the waiting run, and re-applies its window; the scheduled run is still waiting."""
    from playwright.sync_api import sync_playwright

    api, env = stack["api"], stack["env"]
    token = api.login()
    before = {r["dag_run_id"] for r in api.runs(token, BLOB)}
    airflow(env, "dags", "unpause", BLOB)
    try:
        scheduled = wait_for(
            lambda: next((r for r in api.runs(token, BLOB) if r["run_type"] == "scheduled"), None),
            120,
            "the scheduler to start a scheduled run",
        )
        wait_for(
            lambda: task_state(api, token, BLOB, scheduled["dag_run_id"], "wait_for_ready_window") == "deferred",
            180,
            "the scheduled run's sensor to wait for new data",
        )
        window_start = format_time(SPEC.start)
        window_end = format_time(SPEC.start + HOUR)  # one window, ready since the first run
        with sync_playwright() as playwright:
            browser, page = open_browser(playwright, width=1400)
            log_in(page, api.base)
            form = open_trigger_form(page, api.base, BLOB)
            form.locator("[name=element_window_start]").fill(window_start)
            form.locator("[name=element_window_end]").fill(window_end)
            submit_trigger_form(form)
            submitted = time.monotonic()
            backfill = wait_for(
                lambda: next(
                    (
                        r
                        for r in api.runs(token, BLOB)
                        if r["dag_run_id"] not in before
                        and (r.get("conf") or {}).get("window_end") == window_end
                        and r["state"] != "queued"
                    ),
                    None,
                ),
                120,
                "the backfill run to start",
            )
            started_after = time.monotonic() - submitted
            page.goto(f"{api.base}/dags/{BLOB}")
            page.screenshot(path=str(artefacts() / "backfill-beside-waiting-run.png"), full_page=True)
            browser.close()
        assert started_after < 60, f"the backfill started {started_after:.0f} s after it was submitted"
        assert task_state(api, token, BLOB, scheduled["dag_run_id"], "wait_for_ready_window") == "deferred"
        done = wait_for(
            lambda: next(
                (
                    r
                    for r in api.runs(token, BLOB)
                    if r["dag_run_id"] == backfill["dag_run_id"] and r["state"] in ("success", "failed")
                ),
                None,
            ),
            600,
            "the backfill run to finish",
        )
        assert done["state"] == "success", done
        report = xcom(env, BLOB, backfill["dag_run_id"], "commit_checkpoint")
        assert report["kind"] == "backfill" and report["windowsPlanned"] == 1

        # Refused through the scheduler and LocalExecutor (not `dags test`): the reason reaches the monitor.
        beyond = SPEC.last_consumable + 3 * HOUR
        status, created = api.call(
            f"/api/v2/dags/{BLOB}/dagRuns",
            token,
            body={
                "logical_date": None,
                "conf": {"window_start": format_time(beyond), "window_end": format_time(beyond + HOUR)},
            },
        )
        assert status == 200, created
        refused = wait_for(
            lambda: next(
                (
                    r
                    for r in api.runs(token, BLOB)
                    if r["dag_run_id"] == created["dag_run_id"] and r["state"] in ("success", "failed")
                ),
                None,
            ),
            300,
            "the not-ready backfill to be refused",
        )
        assert refused["state"] == "failed"
        [card] = [c for c in api.call("/lakefeed/api/pipelines", token)[1]["pipelines"] if c["key"] == "blob"]
        [row] = [r for r in card["runs"] if r["runId"] == created["dag_run_id"]]
        assert (row["outcome"], row["reason"]["kind"], row["reason"]["task"]) == (
            "refused",
            "not ready",
            "plan_windows",
        )
        assert card["health"]["status"] == "healthy"
    finally:
        airflow(env, "dags", "pause", BLOB)


@pytest.mark.parametrize("dag_id, sensor", [(CDF, "wait_for_new_versions"), (CRDB, "wait_for_resolved")])
def test_the_cdf_and_cockroach_forms_start_a_backfill_at_once_while_a_scheduled_run_waits(stack, ran, dag_id, sensor):
    """As for the blob DAG: with everything applied, the DAG's scheduled run waits (deferred); a backfill
    from its form is running within a minute beside it and succeeds, while the scheduled run still waits."""
    from playwright.sync_api import sync_playwright

    api, env = stack["api"], stack["env"]
    token = api.login()
    if dag_id == CRDB:
        dags_test(env, CRDB)  # the sink applied, so the scheduled run finds nothing new
        resolved = stack["sink_truth"].resolved
        values, key = {"after_resolved": resolved[0], "through_resolved": resolved[1]}, "through_resolved"
    else:
        values, key = {"starting_version": "1", "ending_version": "2"}, "ending_version"
    before = {r["dag_run_id"] for r in api.runs(token, dag_id)}
    airflow(env, "dags", "unpause", dag_id)
    try:
        scheduled = wait_for(
            lambda: next(
                (r for r in api.runs(token, dag_id) if r["run_type"] == "scheduled" and r["dag_run_id"] not in before),
                None,
            ),
            120,
            "the scheduler to start a scheduled run",
        )
        wait_for(
            lambda: task_state(api, token, dag_id, scheduled["dag_run_id"], sensor) == "deferred",
            180,
            "the scheduled run's sensor to wait for new data",
        )
        with sync_playwright() as playwright:
            browser, page = open_browser(playwright, width=1400)
            log_in(page, api.base)
            form = open_trigger_form(page, api.base, dag_id)
            if dag_id == CDF:
                form.locator("[name=element_pipeline]").fill("orders")
            for name, value in values.items():
                form.locator(f"[name=element_{name}]").fill(value)
            submit_trigger_form(form)
            submitted = time.monotonic()
            backfill = wait_for(
                lambda: next(
                    (
                        r
                        for r in api.runs(token, dag_id)
                        if r["dag_run_id"] not in before
                        and str((r.get("conf") or {}).get(key)) == values[key]
                        and r["state"] != "queued"
                    ),
                    None,
                ),
                120,
                "the backfill run to start",
            )
            started_after = time.monotonic() - submitted
            browser.close()
        assert started_after < 60, f"the backfill started {started_after:.0f} s after it was submitted"
        assert task_state(api, token, dag_id, scheduled["dag_run_id"], sensor) == "deferred"
        done = wait_for(
            lambda: next(
                (
                    r
                    for r in api.runs(token, dag_id)
                    if r["dag_run_id"] == backfill["dag_run_id"] and r["state"] in ("success", "failed")
                ),
                None,
            ),
            600,
            "the backfill run to finish",
        )
        assert done["state"] == "success", done
    finally:
        airflow(env, "dags", "pause", dag_id)


def test_airflow_backfill_mode_maps_hours_to_windows_and_skips_an_hour_not_ready(stack, ran):
    """Airflow's own Backfill (here through its REST API, as the UI's Backfill mode calls it) from 00:00 to
    01:00: its "To" date is inclusive, so it makes two hourly runs. The first re-applies window 00:10; the
    second names window 01:10, which the feed has not made consumable: it ends skipped, green, with the reason
    in its log, instead of failing, and the monitor's row says "not ready" with that reason, not "up to
    date"."""
    api, env = stack["api"], stack["env"]
    token = api.login()
    airflow(env, "dags", "unpause", BLOB)
    try:
        status, created = create_backfill(
            api,
            token,
            {
                "dag_id": BLOB,
                "from_date": "2026-01-01T00:00:00Z",
                "to_date": "2026-01-01T01:00:00Z",
                "max_active_runs": 1,
            },
        )
        assert status == 200, created
        done = wait_for(
            lambda: (
                lambda found: (
                    found if len(found) == 2 and all(r["state"] in ("success", "failed") for r in found) else None
                )
            )([r for r in api.runs(token, BLOB) if r["run_type"] == "backfill"]),
            600,
            "the two backfill runs",
        )
        done.sort(key=lambda r: r["data_interval_start"])
        assert [r["state"] for r in done] == ["success", "success"], done
        report = xcom(env, BLOB, done[0]["dag_run_id"], "commit_checkpoint")
        assert report["kind"] == "backfill" and report["windowsApplied"] == [format_time(SPEC.start)]
        assert task_state(api, token, BLOB, done[1]["dag_run_id"], "plan_windows") == "skipped"
        [card] = [c for c in api.call("/lakefeed/api/pipelines", token)[1]["pipelines"] if c["key"] == "blob"]
        outcomes = {r["runId"]: (r["outcome"], r["purpose"]) for r in card["runs"]}
        assert outcomes[done[0]["dag_run_id"]] == ("applied", "backfill")
        # Not "up to date": nothing was applied, because the feed has not reached that hour. The row says so,
        # with the reason the plan task logged and kept.
        assert outcomes[done[1]["dag_run_id"]] == ("not ready", "backfill")
        [row] = [r for r in card["runs"] if r["runId"] == done[1]["dag_run_id"]]
        assert (row["reason"]["kind"], row["reason"]["task"]) == ("not ready", "plan_windows"), row["reason"]
        assert "nothing applied" in row["reason"]["message"] and "lastConsumable is" in row["reason"]["message"]
        assert "the scheduled runs ingest it once it is ready" in row["reason"]["message"]
    finally:
        airflow(env, "dags", "pause", BLOB)


def create_backfill(api: Api, token: str, body: dict, seconds: float = 120) -> tuple[int, dict | str]:
    """POST /api/v2/backfills, asked again while Airflow answers 503 "Database is locked": its documented
    answer when the scheduler holds SQLite's write lock (this test's metadata database; a deployment's
    PostgreSQL has no such lock). The request is one transaction, rolled back on that error, so nothing was
    created; on a loaded 2-core CI machine the scheduler's lock outlasted the first try."""
    deadline = time.monotonic() + seconds
    while True:
        status, answer = api.call("/api/v2/backfills", token, body=body)
        locked = status == 503 and "Database is locked" in str(answer)
        if not locked or time.monotonic() > deadline:
            return status, answer
        time.sleep(2)


def task_state(api: Api, token: str, dag_id: str, run_id: str, task_id: str) -> str | None:
    from urllib.parse import quote

    status, body = api.call(f"/api/v2/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}", token)
    return body.get("state") if status == 200 and isinstance(body, dict) else None


# The browser is test tooling, like Ivy: confined to loopback by its own resolver, not left to the egress
# guard, which would record (and fail the test for) Chromium's own update and sign-in pings to Google,
# sent whatever flags ask it not to.
BROWSER_ON_LOOPBACK = [
    "--no-proxy-server",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1",
]


def open_browser(playwright, width: int, height: int = 1100):
    """Headless chromium and a page whose waits allow for a loaded CI machine (60 s, not Playwright's 30 s):
    the api-server shares two cores with Spark jobs in the other xdist worker."""
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", *BROWSER_ON_LOOPBACK])
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(60_000)
    return browser, page


def log_in(page, base: str) -> None:
    page.goto(f"{base}/")
    page.get_by_label("Username").fill(USER)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{base}/")


def open_trigger_form(page, base: str, dag_id: str):
    """The DAG's trigger dialog (Single Run, with the DAG's params form), as a locator. The DAG stays
    paused ("Unpause on trigger" unticked): the run is created and left queued, not run."""
    page.goto(f"{base}/dags/{dag_id}")
    page.get_by_role("button", name="Trigger").first.click()
    dialog = page.get_by_role("dialog")
    dialog.wait_for()
    unpause = dialog.get_by_role("checkbox", name=re.compile("Unpause"))
    if unpause.count() and unpause.is_checked():
        dialog.get_by_text(re.compile(r"^Unpause .* on trigger$")).click()
        assert not unpause.is_checked()
    return dialog


def submit_trigger_form(dialog) -> None:
    dialog.get_by_role("button", name="Trigger").click()
    dialog.wait_for(state="detached")
