"""The trigger params of each DAG refused in sentences (lakefeed.run_params), and the api-server's
middleware answering a trigger with them before Airflow sees it (lakefeed_airflow.trigger_check)."""

import asyncio
import json
from datetime import UTC, datetime

import pytest

from lakefeed.blob.params import blob_request
from lakefeed.cdf.params import cdf_request
from lakefeed.crdb.params import crdb_request
from lakefeed.errors import ConfigError
from lakefeed_airflow.trigger_check import TriggerParamsCheck, refusal


@pytest.mark.parametrize(
    "params, sentence",
    [
        (
            {"window_start": "2026-02-31T00:10:00Z", "window_end": "2026-03-01T00:10:00Z"},
            "window_start 2026-02-31T00:10:00Z is not a real date: February 2026 has 28 days.",
        ),
        ({"window_start": "2024-02-30T00:10Z", "window_end": "2024-03-01T00:10Z"}, "February 2024 has 29 days"),
        ({"window_start": "2026-13-01T00:10Z", "window_end": "2026-12-01T00:10Z"}, "there is no month 13"),
        ({"window_start": "2026-01-01T24:10Z", "window_end": "2026-01-02T01:10Z"}, "hours go to 23"),
        (
            {"window_start": "yesterday", "window_end": "2026-01-01T01:10Z"},
            "window_start 'yesterday' is not a time: write it as ISO-8601 UTC, for example 2026-01-01T00:10:00Z.",
        ),
        (
            {"window_start": "2026-01-01T00:15:00Z", "window_end": "2026-01-01T01:10:00Z"},
            "window_start 2026-01-01T00:15:00Z is not on the feed's hourly grid: its windows start at minute 10 of every "
            "hour, so the nearest are 2026-01-01T00:10:00Z and 2026-01-01T01:10:00Z.",
        ),
        ({"window_start": "2026-01-01T00:10:30Z", "window_end": "2026-01-01T01:10:00Z"}, "on a whole minute"),
        (
            {"window_start": "2026-01-01T02:10Z", "window_end": "2026-01-01T01:10Z"},
            "window_end 2026-01-01T01:10:00Z must be after window_start 2026-01-01T02:10:00Z: window_end is exclusive",
        ),
        ({"window_start": "2026-01-01T00:10Z"}, "A backfill needs both window_start and window_end"),
        (
            {"window_start": "2026-01-01T00:10Z", "window_end": "2026-01-01T01:10Z", "reset_checkpoint": True},
            "Choose one",
        ),
    ],
)
def test_blob_params_are_refused_in_sentences(params, sentence):
    with pytest.raises(ConfigError) as raised:
        blob_request(params, grid_minute=10)
    assert sentence in str(raised.value)
    assert "^" not in str(raised.value) and "[0-9]" not in str(raised.value)


def test_blob_params_that_make_a_request():
    assert blob_request({}) is None and blob_request({"window_start": "", "window_end": None}) is None
    assert blob_request({"window_start": "2026-01-01 00:10", "window_end": "2026-01-01T02:10:00+00:00"}, 10) == (
        datetime(2026, 1, 1, 0, 10, tzinfo=UTC),
        datetime(2026, 1, 1, 2, 10, tzinfo=UTC),
    )
    # An offset is converted to UTC before the grid is checked; an unknown grid checks whole minutes only.
    assert blob_request({"window_start": "2026-01-01T01:10+01:00", "window_end": "2026-01-01T01:10Z"}, 10)[
        0
    ] == datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert blob_request({"window_start": "2026-01-01T00:17Z", "window_end": "2026-01-01T01:17Z"}) is not None


@pytest.mark.parametrize(
    "params, sentence",
    [
        ({"starting_version": -1, "ending_version": 3}, "starting_version -1 is negative: Delta versions start at 0."),
        (
            {"starting_version": "1.5", "ending_version": 3},
            "is not a version: Delta versions are whole numbers from 0.",
        ),
        ({"starting_version": True, "ending_version": 3}, "is not a version"),
        ({"starting_version": 5, "ending_version": 2}, "ending_version 2 is before starting_version 5"),
        ({"starting_version": 5}, "needs both starting_version and ending_version"),
        ({"full_refresh": True, "starting_version": 2}, "A full refresh takes ending_version"),
        ({"pipeline": "nope"}, "pipeline 'nope' is not configured: choose one of orders, users."),
        ({"full_refresh": True}, "names its pipeline: choose one of orders, users."),
    ],
)
def test_cdf_params_are_refused_in_sentences(params, sentence):
    with pytest.raises(ConfigError, match=None) as raised:
        cdf_request(params, ["orders", "users"])
    assert sentence in str(raised.value)


def test_cdf_params_that_make_a_request():
    request = cdf_request({"pipeline": "orders", "starting_version": "0", "ending_version": 4}, ["orders", "users"])
    assert (request.start, request.end, request.pipeline, request.names_a_range) == (0, 4, "orders", True)
    refresh = cdf_request({"full_refresh": True, "ending_version": 7}, ["orders"])
    assert refresh.full_refresh and not refresh.names_a_range
    assert cdf_request({}, None).names_a_range is False


@pytest.mark.parametrize(
    "params, sentence",
    [
        (
            {"after_resolved": "12", "through_resolved": "1714751617108996000.0000000000"},
            "after_resolved '12' is not a RESOLVED timestamp: write it as the sink names its RESOLVED files",
        ),
        ({"after_resolved": "1714751617108996000.0000000000"}, "A backfill needs through_resolved"),
        ({"after_resolved": "20.0000000001", "through_resolved": "20.0000000000"}, "must be before through_resolved"),
        ({"through_resolved": "20.0000000000", "reset_checkpoint": True}, "Choose one"),
    ],
)
def test_crdb_params_are_refused_in_sentences(params, sentence):
    with pytest.raises(ConfigError) as raised:
        crdb_request(params)
    assert sentence in str(raised.value)


def test_crdb_ranges_compare_as_timestamps_not_text():
    assert crdb_request({"after_resolved": "9.0000000000", "through_resolved": "10.0000000000"}) == (
        "9.0000000000",
        "10.0000000000",
    )
    assert crdb_request({}) == (None, None)


def test_only_lakefeed_dags_are_checked():
    assert refusal("someone_elses_dag", {"window_start": "nonsense"}) is None
    assert refusal("blob_changefeed_to_delta", {}) is None
    assert "is not a real date" in refusal(
        "blob_changefeed_to_delta", {"window_start": "2026-02-31T00:10Z", "window_end": "2026-03-01T00:10Z"}
    )


def _call(path: str, body: dict | bytes, method: str = "POST") -> tuple[list[dict], list[bytes]]:
    """Runs the middleware in front of an app that records what reached it."""
    reached: list[bytes] = []

    async def app(scope, receive, send):
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        reached.append(b"".join(chunks))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    parts = [
        {"type": "http.request", "body": raw[:5], "more_body": True},
        {"type": "http.request", "body": raw[5:], "more_body": False},
    ]
    sent: list[dict] = []

    async def receive():
        return parts.pop(0)

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path}
    asyncio.run(TriggerParamsCheck(app)(scope, receive, send))
    return sent, reached


def test_the_middleware_refuses_a_bad_trigger_with_its_sentence_before_airflow_sees_it(monkeypatch):
    import lakefeed_airflow.trigger_check as check

    monkeypatch.setattr(check, "_context", lambda dag_id: (None, None))
    sent, reached = _call(
        "/api/v2/dags/delta_cdf_to_delta/dagRuns",
        {"logical_date": None, "conf": {"starting_version": -1, "ending_version": 2}},
    )
    assert reached == [] and sent[0]["status"] == 400
    assert json.loads(sent[1]["body"]) == {"detail": "starting_version -1 is negative: Delta versions start at 0."}


def test_the_middleware_passes_a_good_trigger_whole_and_everything_else_untouched(monkeypatch):
    import lakefeed_airflow.trigger_check as check

    monkeypatch.setattr(check, "_context", lambda dag_id: (None, None))
    good = {"logical_date": None, "conf": {"window_start": "2026-01-01T00:10Z", "window_end": "2026-01-01T01:10Z"}}
    sent, reached = _call("/api/v2/dags/blob_changefeed_to_delta/dagRuns", good)
    assert reached == [json.dumps(good).encode()] and sent[0]["status"] == 200
    for path, body, method in (
        ("/api/v2/dags/other/dagRuns", {"conf": {"window_start": "x"}}, "POST"),
        ("/api/v2/dags/blob_changefeed_to_delta/dagRuns", b"not json", "POST"),
        ("/api/v2/dags/blob_changefeed_to_delta/dagRuns/list", {"conf": 1}, "POST"),
        ("/api/v2/dags/blob_changefeed_to_delta/dagRuns", {"conf": {}}, "GET"),
    ):
        sent, reached = _call(path, body, method)
        assert sent[0]["status"] == 200 and len(reached) == 1, path
