"""Every feed, declared once: a :class:`FeedSpec` in its own package (``lakefeed.<feed>.spec.SPEC``),
found by :func:`specs`. The shared modules and the Airflow layer loop over the specs and name no feed, so
adding a feed takes its package and its DAG file (``docs/architecture.md``, "Adding a feed")."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from lakefeed.checkpoint_store import CheckpointStore
    from lakefeed.lineage import JobLineage, JobOutcome
    from lakefeed.monitor import Watched
    from lakefeed.pipeline import FeedHooks, Storage


class ConfigType(Protocol):
    """A feed's configuration class: reads its JSON document (None: the defaults)."""

    def from_json(self, text: str | None, where: str, /) -> Any: ...


@dataclass(frozen=True, kw_only=True)
class FeedSpec:
    """One feed as every shared module sees it."""

    key: str  # its kind: the monitor card's id, the lineage job kind
    dag_id: str
    description: str  # the DAG's one line
    tags: tuple[str, ...]  # the DAG's tags besides "lakefeed"
    hooks: FeedHooks[Any, Any, Any, Any, Any, Any, Any, Any, Any, Any]  # its plan and commit (lakefeed.pipeline)
    config_type: ConfigType
    config_variable: str  # the Airflow Variable holding its configuration (JSON)
    job_script: str  # the spark-submit application, one run per job
    sensor_task: str
    plan_task: str
    apply_task: str
    commit_task: str  # the task whose XCom is the run summary
    alias: str  # the asset alias its commit step emits the changed targets' events through
    range_params: tuple[str, ...]  # params that name a range: a run with any of them is a backfill
    reset_param: str  # the param that re-initialises a pipeline
    reset_control: str  # that param as the trigger form names it
    form: Callable[[], dict[str, dict[str, Any]]]  # the trigger form: param → its JSON-schema fields
    # The monitor's cards: (configuration, a pipeline's checkpoint store, storage) → one per pipeline.
    watched: Callable[[Any, Callable[[Any], CheckpointStore], Storage], list[Watched]]
    lineage_outcome: Callable[[JobLineage, dict[str, Any]], JobOutcome]  # what a finished job applied
    delta_inputs: bool = False  # its jobs read Delta tables (their lineage inputs carry Delta's facets)
    stage_task: str | None = None  # a task before the jobs running FeedHooks.stage for each (None: none)
    # Its DAG starts paused where Airflow first sees it: a feed that needs something set up first (a
    # database connection) does not fail every hour until then.
    paused_at_creation: bool = False

    def config(self, text: str | None) -> Any:
        """The configuration from its Variable's text (None: the defaults)."""
        return self.config_type.from_json(text, f"Variable {self.config_variable}")


EXTRA_FEEDS = "LAKEFEED_FEED_PACKAGES"  # comma-separated packages of feeds kept outside lakefeed


@cache
def specs() -> tuple[FeedSpec, ...]:
    """Every feed package's spec (``<package>.spec.SPEC``), by key: the feed packages of ``lakefeed``, and
    those the environment variable ``LAKEFEED_FEED_PACKAGES`` names (a team's own feeds, in packages of
    their own, set alike on every Airflow machine)."""
    import lakefeed

    packages = [f"lakefeed.{m.name}" for m in pkgutil.iter_modules(lakefeed.__path__) if m.ispkg]
    packages += [name.strip() for name in os.environ.get(EXTRA_FEEDS, "").split(",") if name.strip()]
    found = []
    for package in packages:
        if importlib.util.find_spec(f"{package}.spec") is not None:
            found.append(importlib.import_module(f"{package}.spec").SPEC)
    duplicated = sorted(_repeated([s.key for s in found]) | _repeated([s.dag_id for s in found]))
    if duplicated:
        raise ValueError(f"two feed specs declare {', '.join(duplicated)}: keys and DAG ids name one feed each")
    return tuple(sorted(found, key=lambda spec: spec.key))


def _repeated(names: list[str]) -> set[str]:
    return {name for name in names if names.count(name) > 1}


def spec_of(dag_id: str) -> FeedSpec | None:
    """The spec of the lakefeed DAG ``dag_id`` (None: not a lakefeed DAG)."""
    return next((spec for spec in specs() if spec.dag_id == dag_id), None)
