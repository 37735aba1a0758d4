"""The commit steps of a DAG's runs take turns, on any worker, with nothing shared but Airflow itself.

Under a scheduler the commit steps of every lakefeed DAG run in the one-slot pool
``lakefeed_checkpoints`` (:data:`lakefeed_airflow.dag_defaults.CHECKPOINT_POOL`), so two never run at
once. ``airflow dags test`` ignores pools, and so may two of them on two machines; for those the commit
steps of one DAG also queue by Lamport's bakery algorithm, whose registers are XComs (key
``checkpoint_turn``) of the commit task instances, read and written through the execution API.

Why a bakery: it is the simplest mutual exclusion that holds without a scheduler. The Task SDK gives
tasks no conditional write (a Variable or XCom is set, never compare-and-set), and pools and
``max_active_tis_per_dag`` are applied by the scheduler only; Lamport's bakery needs nothing but
registers each participant writes and all read.

1. push ``choosing``; take a number one above every number the other running commit steps hold; push it;
2. wait while another running commit step is choosing, or holds a smaller ``(number, run_id)``;
3. take the turn: push ``holding`` (the waiters' patience starts again) and note the time; then read
   the checkpoint, compare, write, announce. A step that succeeds keeps its number: Airflow records its
   asset events in the same transaction that ends its task instance's ``running`` state, and only running
   steps are waited for, so the next step cannot read the events before they are there. A step that fails
   pushes number 0 (Airflow drops the events of a failed task).

The turn is a lease. A commit step killed while it holds a number leaves its task instance running until
the scheduler notices; with no scheduler (``airflow dags test``) it never does. So a step that has seen
the same register at the head of the queue (or a step stuck choosing) for ``patience`` seconds goes
ahead of that one, with a warning naming its run. The holder is fenced so that this never lets two write:
it holds the turn for ``patience - grace`` seconds from the moment it pushed ``holding`` (before any
waiter can see it, so a waiter's count is never ahead of the holder's), and :meth:`Lease.check`, called
right before its checkpoint write and again as its task ends, fails the step instead once that is past
while another step waits. ``grace`` covers the write and the task's end after the last check (under a
second; the defaults give 30 s). A step alone, as every step under the pool is, is never failed by it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

log = logging.getLogger(__name__)

TURN_KEY = "checkpoint_turn"
RUNNING = "running"


@dataclass(frozen=True)
class Ticket:
    """One commit step's register: is it choosing a number, and which (0: not waiting nor holding a turn)."""

    run_id: str
    choosing: bool = False
    number: int = 0
    holding: bool = False  # it has taken the turn

    @classmethod
    def from_xcom(cls, run_id: str, value: Any) -> Ticket:
        if not isinstance(value, dict):
            return cls(run_id)
        number = value.get("number")
        return cls(
            run_id, bool(value.get("choosing")), number if isinstance(number, int) else 0, bool(value.get("holding"))
        )

    def to_xcom(self) -> dict[str, Any]:
        return {"choosing": self.choosing, "number": self.number, "holding": self.holding}


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
        runs = sorted(run for run, tasks in states.items() if run != ti.run_id and tasks.get(self.task_id) == RUNNING)
        return [
            Ticket.from_xcom(run, ti.xcom_pull(task_ids=self.task_id, run_id=run, key=TURN_KEY, map_indexes=None))
            for run in runs
        ]


def blocking(ahead: list[Ticket]) -> list[Ticket]:
    """The steps ahead that hold the queue up now: those choosing, and the smallest number (the ones
    behind it wait for it too, so their own wait says nothing of them)."""
    numbered = [t for t in ahead if not t.choosing]
    head = [min(numbered, key=lambda t: (t.number, t.run_id))] if numbered else []
    return [t for t in ahead if t.choosing] + head


class TurnLapsedError(RuntimeError):
    """A commit step held the checkpoint turn past its lease while another waited: it writes nothing more."""


@dataclass
class Lease:
    """The holder's side of the turn: :meth:`check` before each write (see the module's docstring)."""

    registers: TurnRegisters
    run_id: str
    taken_at: float
    seconds: float
    clock: Callable[[], float]

    def check(self) -> None:
        """Raise :class:`TurnLapsedError` when the lease is past and another commit step waits (one that
        may have gone ahead of this one); return otherwise."""
        held = self.clock() - self.taken_at
        if held <= self.seconds:
            return
        waiting = [t.run_id for t in self.registers.others() if t.choosing or t.number]
        if waiting:
            raise TurnLapsedError(
                f"the commit step of {self.run_id} has held the checkpoint turn for {held:.0f}s, past its "
                f"{self.seconds:.0f}s lease, while {', '.join(waiting)} waited and may have gone ahead: it "
                f"writes nothing more. What its jobs committed is in the targets' ledger: the next run "
                f"finds it applied, and its commit step moves the checkpoint and announces it."
            )


@contextmanager
def turn(
    registers: TurnRegisters,
    run_id: str,
    patience: float = 120.0,
    poll: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    grace: float | None = None,
) -> Iterator[Lease]:
    """Hold the DAG's checkpoint turn for the body, which gets the :class:`Lease` (see the module's
    docstring); ``grace`` defaults to a quarter of ``patience``."""
    registers.push(Ticket(run_id, choosing=True))
    try:
        own = Ticket(run_id, number=next_number(registers.others()))
        registers.push(own)
        since: dict[Ticket, float] = {}  # when each register now blocking the queue began to, unchanged
        passed: set[Ticket] = set()
        waited_for: list[str] = []
        while True:
            ahead = [t for t in ahead_of(own, registers.others()) if t not in passed]
            if not ahead:
                break
            if [t.run_id for t in ahead] != waited_for:
                waited_for = [t.run_id for t in ahead]
                log.info("waiting for the commit step of %s to finish", ", ".join(waited_for))
            now = clock()
            for ticket in blocking(ahead):
                if now - since.setdefault(ticket, now) >= patience:
                    log.warning(
                        "the commit step of %s has held the turn for over %.0fs (killed without a "
                        "scheduler to notice?); going ahead of it",
                        ticket.run_id,
                        patience,
                    )
                    passed.add(ticket)
            if all(t in passed for t in ahead):
                break
            sleep(poll)
        taken_at = clock()
        registers.push(Ticket(run_id, number=own.number, holding=True))
    except BaseException:
        registers.push(Ticket(run_id))
        raise
    lease = Lease(registers, run_id, taken_at, patience - (patience / 4 if grace is None else grace), clock)
    try:
        yield lease
    except BaseException:
        try:
            registers.push(Ticket(run_id))  # failed: its events are dropped, the next step may go
        except Exception:  # the step's own error is the one to report
            log.warning("could not give the checkpoint turn back (it lapses when the task ends)", exc_info=True)
        raise
