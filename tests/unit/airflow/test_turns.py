"""Commit steps taking turns (Lamport's bakery over registers): the decision as a pure function, the
wait and its patience with a fake clock, and many processes writing one checkpoint at once through
file registers (a real race, no lock) without losing an update."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest

from lakefeed.cdf.checkpoint import CdfCheckpoint
from lakefeed_airflow.turns import Ticket, TurnLapsedError, ahead_of, next_number, turn
from tests.cells import FileCell, file_store


def test_a_step_takes_a_number_above_every_number_held():
    assert next_number([]) == 1
    assert next_number([Ticket("a", number=3), Ticket("b", choosing=True), Ticket("c", number=7)]) == 8


def test_a_step_waits_for_those_choosing_and_those_with_a_smaller_ticket():
    own = Ticket("run-b", number=4)
    others = [
        Ticket("run-a", number=4),
        Ticket("run-c", number=4),
        Ticket("run-d", number=3),
        Ticket("run-e", choosing=True),
        Ticket("run-f"),
        Ticket("run-g", number=9),
    ]
    assert [t.run_id for t in ahead_of(own, others)] == ["run-a", "run-d", "run-e"]
    assert ahead_of(own, [Ticket("run-f"), Ticket("run-g", number=9)]) == []


def test_a_ticket_reads_back_from_xcom_and_tolerates_what_is_not_one():
    assert Ticket.from_xcom("r", Ticket("r", True, 5).to_xcom()) == Ticket("r", True, 5)
    assert Ticket.from_xcom("r", Ticket("r", False, 5, holding=True).to_xcom()) == Ticket("r", number=5, holding=True)
    assert Ticket.from_xcom("r", {"choosing": False, "number": 2}) == Ticket("r", number=2)  # before leases
    assert Ticket.from_xcom("r", None) == Ticket("r") == Ticket.from_xcom("r", {"number": "x"})


class ListRegisters:
    def __init__(self, others):
        self.pushed, self._others = [], others

    def push(self, ticket):
        self.pushed.append(ticket)

    def others(self):
        return self._others() if callable(self._others) else self._others


def test_a_step_alone_takes_its_turn_at_once_and_keeps_its_number_until_its_task_ends():
    # Airflow records the step's asset events as its task instance leaves "running": giving the number
    # back before that would let the next step read the events before they exist.
    registers = ListRegisters([])
    with turn(registers, "run-1", sleep=lambda s: (_ for _ in ()).throw(AssertionError("waited"))):
        assert registers.pushed == [
            Ticket("run-1", choosing=True),
            Ticket("run-1", number=1),
            Ticket("run-1", number=1, holding=True),
        ]
    assert registers.pushed[-1] == Ticket("run-1", number=1, holding=True)


def test_a_step_waits_until_the_step_ahead_is_done_and_gives_its_turn_back_on_error():
    polls = iter([[Ticket("run-0", number=1)], [Ticket("run-0", number=1)], [Ticket("run-0", number=1)], []])
    registers, slept = ListRegisters(lambda: next(polls)), []
    try:
        with turn(registers, "run-1", sleep=slept.append, poll=0.5):
            assert registers.pushed[-1] == Ticket("run-1", number=2, holding=True) and slept == [0.5, 0.5]
            raise RuntimeError("the body failed")
    except RuntimeError:
        pass
    assert registers.pushed[-1] == Ticket("run-1")


def test_a_step_held_by_a_dead_one_goes_ahead_after_its_patience(caplog):
    now = [0.0]
    registers = ListRegisters([Ticket("run-zombie", number=1)])
    with turn(
        registers, "run-1", patience=10, poll=1, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    ):
        assert now[0] == 10
    assert "run-zombie has held the turn for over 10s" in caplog.text


def test_patience_runs_for_the_head_of_the_queue_only_and_passes_no_live_step(caplog):
    # A dead step holds number 1; a live one with number 2 waits for it too, then passes it at t=10 and
    # works until t=18. The step with number 3 passes the dead one only, and goes in when the live one ends.
    now = [0.0]

    def others():
        live = [Ticket("run-b", number=2)] if now[0] < 18 else []
        return [Ticket("run-a", number=1), *live]

    registers = ListRegisters(others)
    with turn(
        registers, "run-c", patience=10, poll=1, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    ):
        assert registers.pushed[-1] == Ticket("run-c", number=3, holding=True)
        assert now[0] == 18
    assert "run-a has held" in caplog.text and "run-b has held" not in caplog.text


def test_a_step_stuck_choosing_is_passed_after_the_patience_too():
    now = [0.0]
    registers = ListRegisters([Ticket("run-a", choosing=True)])
    with turn(
        registers, "run-b", patience=5, poll=1, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)
    ):
        assert now[0] == 5


class World:
    """Registers every step shares, a fake clock, and each step's view of the others."""

    def __init__(self):
        self.now, self.tickets = 0.0, {}

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def of(self, run_id):
        world = self

        class Registers:
            def push(self, ticket):
                world.tickets[run_id] = ticket

            def others(self):
                return [t for run, t in sorted(world.tickets.items()) if run != run_id]

        return Registers()


def test_a_holder_past_its_lease_while_another_waits_writes_nothing_more():
    # The holder took the turn at t=0 (lease 90 s of patience 120). A waiter that counts from then may go
    # ahead at t=120; the holder's check fails from t=90 on, so the two never write at once.
    world = World()
    with turn(world.of("run-a"), "run-a", patience=120, clock=world.clock, sleep=world.sleep) as lease:
        world.now = 89.0
        world.tickets["run-b"] = Ticket("run-b", number=2)
        lease.check()  # inside its lease
        world.now = 91.0
        with pytest.raises(TurnLapsedError, match=r"run-a has held the checkpoint turn for 91s, past its 90s lease"):
            lease.check()
        del world.tickets["run-b"]
        lease.check()  # past it, but alone (as every step is under the pool): nobody can have gone ahead


def test_a_waiter_counts_its_patience_from_the_turn_being_taken_not_from_the_number():
    # run-a took number 1 at t=0 and waited 50 s for a step stuck choosing before taking the turn; run-b,
    # waiting since t=0 too, must not pass run-a at t=120 but at 170: the "holding" push restarts its count.
    world = World()
    world.tickets["run-a"] = Ticket("run-a", number=1)

    def step_a_takes_the_turn(seconds):
        world.sleep(seconds)
        if world.now == 50:
            world.tickets["run-a"] = Ticket("run-a", number=1, holding=True)

    with turn(world.of("run-b"), "run-b", patience=120, clock=world.clock, sleep=step_a_takes_the_turn):
        assert world.now == 170


def test_a_fenced_write_is_refused_once_the_lease_has_lapsed():
    from lakefeed_airflow.settings import VariableCell

    refused = VariableCell("never_written", fence=lambda: (_ for _ in ()).throw(TurnLapsedError("lapsed")))
    with pytest.raises(TurnLapsedError):
        refused.set("{}")


class FileRegisters:
    """One JSON file per participant (written atomically), as the XComs of the commit task instances."""

    def __init__(self, folder: Path, me: str, everyone: list[str]):
        self.folder, self.me, self.everyone = folder, me, everyone

    def push(self, ticket):
        FileCell(self.folder / f"{self.me}.json").set(json.dumps(ticket.to_xcom()))

    def others(self):
        tickets = []
        for run in self.everyone:
            path = self.folder / f"{run}.json"
            if run != self.me and path.exists():
                tickets.append(Ticket.from_xcom(run, json.loads(path.read_text())))
        return tickets


def _hammer(folder: str, worker: int, workers: int, rounds: int) -> None:
    store = file_store(Path(folder), CdfCheckpoint)
    registers = FileRegisters(Path(folder) / "turns", f"run-{worker}", [f"run-{w}" for w in range(workers)])
    for round_ in range(rounds):
        # Each write records its generation: a lost update would show as two writers with one generation.
        def change(cp, round_=round_):
            log = json.loads(cp.updated_by or "[]")
            return cp.moved(
                applied_version=(cp.applied_version or 0) + 1,
                updated_by=json.dumps(log + [[worker, round_, cp.generation + 1]]),
            )

        with turn(registers, f"run-{worker}", poll=0.001, patience=60):
            store.update(change)
        registers.push(Ticket(f"run-{worker}"))  # its task instance ends: Airflow no longer lists it running


def test_many_processes_taking_turns_lose_no_update(tmp_path):
    workers, rounds = 6, 15
    os.makedirs(tmp_path / "turns")
    processes = [
        multiprocessing.get_context("fork").Process(target=_hammer, args=(str(tmp_path), w, workers, rounds))
        for w in range(workers)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    final = file_store(tmp_path, CdfCheckpoint).load()
    writes = json.loads(final.updated_by)
    assert final.applied_version == final.generation == workers * rounds == len(writes)
    assert [generation for _, _, generation in writes] == list(range(1, workers * rounds + 1))
