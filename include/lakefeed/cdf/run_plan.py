"""A Delta CDF run's plan, as the plan task hands it to the jobs and the commit step (an XCom, serialised by
:mod:`lakefeed.documents`): the jobs of every pipeline, what the plan saw of each pipeline's source and
target, and the configuration it read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lakefeed.assets import FULL_REFRESH_MODE
from lakefeed.cdf.config import CdfConfig
from lakefeed.checkpoint import TableMark
from lakefeed.documents import optional

CHANGES, FULL_REFRESH = "changes", FULL_REFRESH_MODE  # a job's modes


@dataclass(frozen=True)
class CdfJob:
    """One spark-submit: a pipeline's versions ``start..end`` (inclusive) of the change feed, or a full refresh
    of its target from a snapshot at ``version``."""

    pipeline: str
    mode: str  # CHANGES or FULL_REFRESH
    start: int | None = optional()
    end: int | None = optional()
    version: int | None = optional()

    @property
    def first(self) -> int:
        """The first source version the job reads."""
        return self.start if self.start is not None else self._snapshot

    @property
    def last(self) -> int:
        """The last source version the job reads (its target holds the source at this version after it)."""
        return self.end if self.end is not None else self._snapshot

    @property
    def _snapshot(self) -> int:
        assert self.version is not None, f"a {self.mode} job names its versions"
        return self.version


@dataclass(frozen=True, kw_only=True)
class PipelinePlan:
    """What the plan decided and saw for one pipeline."""

    kind: str  # scheduled, backfill or reset (lakefeed.progress): a first run may be a reset
    origin: int | None  # the version a first run's position starts from (0), else None
    latest: int  # the source's latest version
    source_table_id: str | None
    applied_before: int | None  # the checkpoint's applied version when the plan read it
    # The target's id and version when planned (lakefeed.pipeline.plan_marks); None from a plan made before
    # they were recorded.
    target_marks: dict[str, TableMark] | None = None


@dataclass(frozen=True, kw_only=True)
class CdfPlan:
    DOCUMENT_VERSION: ClassVar[int] = 1

    version: int = DOCUMENT_VERSION
    kind: str
    jobs: list[CdfJob]
    pipelines: dict[str, PipelinePlan]
    config: CdfConfig
