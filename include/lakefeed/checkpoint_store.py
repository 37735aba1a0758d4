"""Compare-and-set writes of a checkpoint document kept in a text cell (an Airflow Variable).

Airflow Variables have no conditional update, so two commit steps that both
read, change and write one could lose an update, or undo a reset. Writers are
kept apart through Airflow itself, on any worker:

- by the scheduler: the commit steps of every lakefeed DAG run in the one-slot
  pool ``lakefeed_checkpoints``
  (:data:`lakefeed_airflow.dag_defaults.CHECKPOINT_POOL`), so two never run at
  once, wherever they run;
- for what bypasses the scheduler (``airflow dags test``, which ignores pools),
  the commit steps of a DAG take turns through XCom registers
  (:mod:`lakefeed_airflow.turns`).

Every writer changes a checkpoint through :meth:`CheckpointStore.update`: it
reads the stored document and computes the new one from it (never from a value
read earlier in the run), then reads the cell again right before writing and
writes only if it still holds what it read; a writer that bypassed both (a hand
edit) makes it start over from the new value, and after ``attempts`` such
conflicts it gives up without writing anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from lakefeed.errors import CheckpointConflictError

log = logging.getLogger(__name__)


class Checkpoint(Protocol):
    """What the store needs of a checkpoint document."""

    @property
    def generation(self) -> int: ...

    def to_json(self) -> str: ...


class CheckpointKind(Protocol):
    """A checkpoint class: reads its document (``None``: no document yet)."""

    def from_json(self, text: str | None, where: str, /) -> Any: ...


C = TypeVar("C", bound=Checkpoint)


class TextCell(Protocol):
    """Where a checkpoint document is kept: an Airflow Variable in production."""

    name: str

    def get(self) -> str | None: ...

    def set(self, text: str) -> None: ...


class CheckpointStore:
    """One checkpoint document of type ``kind`` (``from_json``/``to_json``/``moved``) in ``cell``."""

    def __init__(self, cell: TextCell, kind: CheckpointKind):
        self.cell = cell
        self.kind = kind

    @property
    def where(self) -> str:
        return f"Variable {self.cell.name}"

    def load(self) -> Any:
        return self.kind.from_json(self.cell.get(), self.where)

    def update(self, change: Callable[[C], C], attempts: int = 5) -> tuple[C, C]:
        """``(before, after)``: ``change`` applied to the stored checkpoint, written by compare-and-set.

        ``change`` must return its argument unchanged (nothing is written) or a value made with
        ``.moved(...)``. It may run more than once (after a conflict), so it must be pure.
        """
        for attempt in range(1, attempts + 1):
            text = self.cell.get()
            before = self.kind.from_json(text, self.where)
            after = change(before)
            if after == before:
                return before, before
            if self.cell.get() != text:
                log.warning(
                    "%s changed while it was being updated (attempt %d of %d); starting over from the new value",
                    self.where,
                    attempt,
                    attempts,
                )
                continue
            self.cell.set(after.to_json())
            log.info("%s: generation %d -> %d: %s", self.where, before.generation, after.generation, after.to_json())
            return before, after
        raise CheckpointConflictError(
            f"{self.where} kept changing under this writer ({attempts} attempts); nothing was written. Is "
            f"something editing it outside the lakefeed DAGs?"
        )
