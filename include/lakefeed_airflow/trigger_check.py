"""Trigger-time checks of the lakefeed DAGs' params, in the api-server, in sentences.

Airflow validates a triggered run's params one by one against their JSON schemas
and answers a bad value with the schema's wording (a regular expression), and
cannot check rules across params (both ends of a range, their order). This ASGI
middleware, installed by the ``lakefeed_monitor`` plugin as a root middleware,
sees ``POST /api/v2/dags/<dag_id>/dagRuns`` for the lakefeed DAGs (:func:`lakefeed.feeds.specs`) before
Airflow does, checks the run's ``conf`` as the plans read it (the feed's
``FeedHooks.check_params``) and refuses a bad request with ``400`` and a sentence
as its ``detail``, which the trigger dialog shows. Every other request passes
untouched; a request it cannot read passes too, for Airflow to answer.

What the checks need besides the params (the configuration, e.g. the configured CDF
pipelines; the checkpoints, e.g. the blob feed's grid minute) is read from the
Variables at that moment; when the database cannot be read, the defaults stand in
and the rest is left to the plan.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from lakefeed.errors import ConfigError
from lakefeed.feeds import spec_of

log = logging.getLogger(__name__)

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_TRIGGER = re.compile(r"^/api/v2/dags/(?P<dag_id>[^/]+)/dagRuns/?$")

Checkpoints = Callable[[Any], Any]  # a pipeline's checkpoint as it is now


def refusal(
    dag_id: str, conf: dict[str, Any], config: Any = None, checkpoints: Checkpoints | None = None
) -> str | None:
    """The sentence refusing ``conf`` for a run of ``dag_id``, or None when the params make a request the
    plan can serve (or the DAG is not a lakefeed DAG). ``config`` and ``checkpoints``: the feed's as they
    are now (default: the defaults and empty checkpoints)."""
    spec = spec_of(dag_id)
    if spec is None:
        return None
    kind = spec.hooks.checkpoint_type
    try:
        spec.hooks.check_params(
            conf,
            spec.config(None) if config is None else config,
            checkpoints or (lambda pipeline: kind.from_json(None, f"Variable {pipeline.checkpoint_variable}")),
        )
    except ConfigError as exc:
        return str(exc)
    return None


def _context(dag_id: str) -> tuple[Any, Checkpoints | None]:
    """The feed's configuration and checkpoints now (core models: the api-server reads the metadata database
    directly). A configuration that cannot be read is refused with its sentence by the check; when the
    database cannot be read, the checks use the defaults and leave the rest to the plan."""
    spec = spec_of(dag_id)
    if spec is None:
        return None, None
    from lakefeed_airflow.settings import checkpoint_store, config_of

    try:
        config = config_of(spec, orm=True)
    except ConfigError:
        raise
    except Exception as exc:
        log.info("trigger check of %s on the defaults: %s", dag_id, type(exc).__name__)
        return None, None
    kind = spec.hooks.checkpoint_type
    return config, lambda pipeline: checkpoint_store(pipeline, kind, orm=True).load()


class TriggerParamsCheck:
    """The root middleware (pure ASGI: the body is read once and replayed to Airflow when it passes)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        match = _TRIGGER.match(scope.get("path", "")) if scope.get("type") == "http" else None
        if match is None or scope.get("method") != "POST" or spec_of(match["dag_id"]) is None:
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
        try:
            config, checkpoints = await run_in_threadpool(_context, dag_id)
        except ConfigError as exc:
            return str(exc)
        return refusal(dag_id, conf, config, checkpoints)


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
