"""Trigger-time checks of the lakefeed DAGs' params, in the api-server, in sentences.

Airflow validates a triggered run's params one by one against their JSON schemas
and answers a bad value with the schema's wording (a regular expression), and
cannot check rules across params (both ends of a range, their order). This ASGI
middleware, installed by the ``lakefeed_monitor`` plugin as a root middleware,
sees ``POST /api/v2/dags/<dag_id>/dagRuns`` for the three lakefeed DAGs before
Airflow does, checks the run's ``conf`` with the functions the plans use
(:mod:`lakefeed.run_params`) and refuses a bad request with ``400`` and a sentence
as its ``detail``, which the trigger dialog shows. Every other request passes
untouched; a request it cannot read passes too, for Airflow to answer.

What the checks need besides the params (the blob feed's grid minute, recorded in
its checkpoint; the configured CDF pipelines) is read from the Variables at that
moment, best effort: unknown, those checks are left to the plan.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from lakefeed.errors import ConfigError

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_TRIGGER = re.compile(r"^/api/v2/dags/(?P<dag_id>[^/]+)/dagRuns/?$")
BLOB_DAG, CDF_DAG, CRDB_DAG = "blob_changefeed_to_delta", "delta_cdf_to_delta", "cockroach_changefeed_to_delta"


def refusal(
    dag_id: str, conf: dict[str, Any], blob_grid_minute: int | None = None, cdf_pipelines: list[str] | None = None
) -> str | None:
    """The sentence refusing ``conf`` for a run of ``dag_id``, or None when the params make a request the
    plan can serve (or the DAG is not a lakefeed DAG)."""
    from lakefeed.run_params import blob_request, cdf_request, crdb_request

    checks: dict[str, Callable[[], object]] = {
        BLOB_DAG: lambda: blob_request(conf, blob_grid_minute),
        CDF_DAG: lambda: cdf_request(conf, cdf_pipelines),
        CRDB_DAG: lambda: crdb_request(conf),
    }
    if dag_id not in checks:
        return None
    try:
        checks[dag_id]()
    except ConfigError as exc:
        return str(exc)
    return None


def _hints(dag_id: str) -> dict[str, Any]:
    """What the checks of ``dag_id`` can know besides the params, read from the Variables now (core
    models: the api-server reads the metadata database directly)."""
    from airflow.models.variable import Variable

    def variable(name: str) -> dict:
        text = Variable.get(name, default_var=None)
        return json.loads(text) if text else {}

    try:
        if dag_id == BLOB_DAG:
            from lakefeed_airflow.settings import BLOB_CONFIG_VARIABLE

            checkpoint = variable(variable(BLOB_CONFIG_VARIABLE).get("checkpoint_variable", "lakefeed_blob_checkpoint"))
            minute = checkpoint.get("gridMinute")
            return {"blob_grid_minute": minute if isinstance(minute, int) and 0 <= minute < 60 else None}
        if dag_id == CDF_DAG:
            from lakefeed.config import CdfConfig
            from lakefeed_airflow.settings import CDF_CONFIG_VARIABLE

            text = Variable.get(CDF_CONFIG_VARIABLE, default_var=None)
            return {"cdf_pipelines": [p.name for p in CdfConfig.from_json(text, CDF_CONFIG_VARIABLE).pipelines]}
    except Exception as exc:
        log.info("trigger check of %s without hints: %s", dag_id, type(exc).__name__)
    return {}


class TriggerParamsCheck:
    """The root middleware (pure ASGI: the body is read once and replayed to Airflow when it passes)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _TRIGGER.match(scope.get("path", "")) if scope.get("type") == "http" else None
        if match is None or scope.get("method") != "POST" or match["dag_id"] not in (BLOB_DAG, CDF_DAG, CRDB_DAG):
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:
            message = await receive()
            messages.append(message)
            if message.get("type") != "http.request" or not message.get("more_body"):
                break
        body = b"".join(m.get("body", b"") for m in messages if m.get("type") == "http.request")
        sentence = await self._refusal(match["dag_id"], body)
        if sentence is not None:
            await _answer(send, 400, {"detail": sentence})
            return

        async def replay() -> Message:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    @staticmethod
    async def _refusal(dag_id: str, body: bytes) -> str | None:
        from starlette.concurrency import run_in_threadpool

        try:
            conf = json.loads(body or b"{}").get("conf") or {}
        except (ValueError, AttributeError):
            return None  # not ours to answer: Airflow refuses a malformed body itself
        if not isinstance(conf, dict):
            return None
        hints = await run_in_threadpool(_hints, dag_id)
        return refusal(dag_id, conf, **hints)


async def _answer(send: Send, status: int, document: dict[str, Any]) -> None:
    payload = json.dumps(document).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": payload})
