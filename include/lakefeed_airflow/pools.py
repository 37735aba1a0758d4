"""The pools every lakefeed DAG runs its tasks in, and the one place that creates them.

A task in a pool that does not exist is never scheduled: Airflow's scheduler logs a warning and the run
waits for ever (with one active run per DAG, so does every later hour). So the project makes its pools
itself wherever its DAGs run: the plugin (``lakefeed_monitor_plugin``) calls :func:`ensure_pools` when
the scheduler, the api-server, the dag-processor or the triggerer starts (the processes with the metadata
database), and set-up scripts call it through ``python -m lakefeed_airflow.pools``. A pool that exists is
left as it is: an operator's own slot count wins.
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass
from typing import Any

from lakefeed_airflow.dag_defaults import CHECKPOINT_POOL, SPARK_POOL

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolSpec:
    slots: int
    description: str


POOLS: dict[str, PoolSpec] = {
    # How many spark-submit jobs of lakefeed pipelines run at once: size it to what the Spark cluster
    # runs side by side (raise it with `airflow pools set lakefeed_spark <slots> ...`; kept when it exists).
    SPARK_POOL: PoolSpec(1, "spark-submit jobs of lakefeed pipelines"),
    # One slot, always: the commit steps (checkpoint writers) of every lakefeed DAG, one at a time.
    CHECKPOINT_POOL: PoolSpec(1, "lakefeed checkpoint writers (commit steps), one at a time"),
}

# The Airflow commands whose processes hold the metadata database (tasks and Edge workers do not).
METADATA_COMMANDS = frozenset({"scheduler", "api-server", "dag-processor", "triggerer", "standalone"})


def ensure_pools(session: Any = None) -> list[str]:
    """Create every lakefeed pool that is missing (existing pools keep their slots); the names created."""
    from airflow.models.pool import Pool
    from airflow.utils.session import create_session
    from sqlalchemy import select

    def create(session: Any) -> list[str]:
        present = set(session.scalars(select(Pool.pool).where(Pool.pool.in_(list(POOLS)))))
        missing = [name for name in POOLS if name not in present]
        for name in missing:
            spec = POOLS[name]
            session.add(Pool(pool=name, slots=spec.slots, description=spec.description, include_deferred=False))
        return missing

    if session is not None:
        return create(session)
    with create_session() as own:
        return create(own)


def ensure_pools_at_start() -> None:
    """:func:`ensure_pools` in a process that holds the metadata database; never fails the process (two
    processes starting at once may race on a pool's name: the other one made it)."""
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command not in METADATA_COMMANDS:
        return
    try:
        created = ensure_pools()
    except Exception as error:  # the plugin must load whatever happens here
        log.warning(
            "lakefeed could not check its pools (%s): create them with `python -m lakefeed_airflow.pools`", error
        )
        return
    for name in created:
        log.warning("lakefeed created the pool %s (%d slots)", name, POOLS[name].slots)


def main() -> int:
    created = ensure_pools()
    for name, spec in POOLS.items():
        print(f"pool {name}: {'created' if name in created else 'exists'} ({spec.slots} slots by default)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
