"""The commit steps of a DAG's runs take turns, on any worker, with nothing shared but Airflow itself.

Under a scheduler the commit steps of every lakefeed DAG run in the one-slot pool
``lakefeed_checkpoints`` (:data:`lakefeed_airflow.dag_defaults.CHECKPOINT_POOL`), so two never run at
once. ``airflow dags test`` ignores pools, and so may two of them on two machines; for those the commit
steps of one DAG also queue by Lamport's bakery algorithm, whose registers are XComs (key
``checkpoint_turn``) of the commit task instances, read and written through the execution API:

1. push ``choosing``; take a number one above every number the other running commit steps hold; push it;
2. wait while another running commit step is choosing, or holds a smaller ``(number, run_id)``;
3. take the turn (read the checkpoint, compare, write, announce); push number 0.

Each register is one XCom value, so ``choosing`` and ``number`` are read together. A commit step killed
while it holds a number leaves its task instance running until the scheduler notices; with no scheduler
(``airflow dags test``) it never does, so a step waits at most ``patience`` seconds for one run before it
goes ahead with a warning naming it (the checkpoint's compare-and-set still refuses a lost update).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

log = logging.getLogger(__name__)

TURN_KEY = "checkpoint_turn"
RUNNING = "running"


@dataclass(frozen=True)
class Ticket:
    """One commit step's register: is it choosing a number, and which (0: not waiting nor holding a turn)."""

    run_id: str
    choosing: bool = False
    number: int = 0

    @classmethod
    def from_xcom(cls, run_id: str, value: Any) -> Ticket:
        if not isinstance(value, dict):
            return cls(run_id)
        number = value.get("number")
        return cls(run_id, bool(value.get("choosing")), number if isinstance(number, int) else 0)

    def to_xcom(self) -> dict[str, Any]:
        return {"choosing": self.choosing, "number": self.number}


def next_number(others: list[Ticket]) -> int:
    """The number a step takes: one above every number held."""
    return 1 + max((t.number for t in others), default=0)


def ahead_of(own: Ticket, others: list[Ticket]) -> list[Ticket]:
    """The steps ``own`` waits for: those choosing a number, and those holding a smaller ``(number, run_id)``."""
    return [t for t in others if t.choosing or (t.number and (t.number, t.run_id) < (own.number, own.run_id))]


class TurnRegisters(Protocol):
    """Where the steps taking turns keep their tickets."""

    def push(self, ticket: Ticket) -> None: ...

    def others(self) -> list[Ticket]: ...


class Registers:
    """The ``checkpoint_turn`` registers of a DAG's commit task (XComs), through a running task instance."""

    def __init__(self, ti: Any, task_id: str):
        self.ti, self.task_id = ti, task_id

    def push(self, ticket: Ticket) -> None:
        self.ti.xcom_push(key=TURN_KEY, value=ticket.to_xcom())

    def others(self) -> list[Ticket]:
        """The registers of the commit steps of the DAG's other runs that are running now."""
        ti = self.ti
        if ti.get_ti_count(dag_id=ti.dag_id, task_ids=[self.task_id], states=[RUNNING]) <= 1:
            return []  # only this step
        states = ti.get_task_states(dag_id=ti.dag_id, task_ids=[self.task_id])
        runs = sorted(run for run, tasks in states.items()
                      if run != ti.run_id and tasks.get(self.task_id) == RUNNING)
        return [Ticket.from_xcom(run, ti.xcom_pull(task_ids=self.task_id, run_id=run, key=TURN_KEY,
                                                   map_indexes=None)) for run in runs]


@contextmanager
def turn(registers: TurnRegisters, run_id: str, patience: float = 120.0, poll: float = 1.0,
         clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Iterator[None]:
    """Hold the DAG's checkpoint turn for the body (see the module's docstring)."""
    registers.push(Ticket(run_id, choosing=True))
    try:
        own = Ticket(run_id, number=next_number(registers.others()))
        registers.push(own)
        started = clock()
        waited_for: list[Ticket] = []
        while True:
            ahead = ahead_of(own, registers.others())
            if not ahead:
                break
            if [t.run_id for t in ahead] != [t.run_id for t in waited_for]:
                log.info("waiting for the commit step of %s to finish", ", ".join(t.run_id for t in ahead))
                waited_for = ahead
            if clock() - started >= patience:
                log.warning("the commit step of %s held its turn for over %.0fs (killed without a scheduler to "
                            "notice?); going ahead", ", ".join(t.run_id for t in ahead), patience)
                break
            sleep(poll)
        yield
    finally:
        registers.push(Ticket(run_id))
