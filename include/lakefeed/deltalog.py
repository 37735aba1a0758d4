"""A Delta table's ``_delta_log``, read without a JVM: delta-rs for the table's state, our reader for one commit.

Sensors, planners and commit steps use this to decide without starting Spark: which versions exist,
which table (``metaData.id``) sits at a path, whether a target was restored, which versions were
committed in a time interval, what a range's commits changed.

**delta-rs** (``deltalake``) reads everything that needs the log replayed, so checkpoints of every kind
(classic, multi-part, V2 with sidecars), log compaction and new protocol features are its to follow:

- a snapshot at the latest version or any version the log can still rebuild: the table's
  ``metaData`` (id, properties), schema and file list with statistics (:meth:`DeltaLog.snapshot` and
  everything built on it: :meth:`~DeltaLog.latest_metadata`, :meth:`~DeltaLog.table_id`,
  :meth:`~DeltaLog.table_state`, :meth:`~DeltaLog.properties`, :meth:`~DeltaLog.bytes_in_range`);
- the commit infos of the latest commits, newest first (:meth:`DeltaLog.history`: RESTOREs, rebuild
  markers, writers' ``userMetadata``).

**Our own reader** is kept where delta-rs's Python API offers nothing, and only for the log's plainest
part, a commit file (``NNNNNNNNNNNNNNNNNNNN.json``: one action per line):

- the list of commit versions (:meth:`DeltaLog.commit_versions`): which versions log cleanup left,
  and the latest version, from one listing (a sensor polls it) instead of a replay;
- one commit's actions (:meth:`DeltaLog.actions`): whether it changed rows (the ``dataChange`` of its
  ``add``/``remove``/``cdc``: :func:`changes_rows`) and the ``metaData`` it carries
  (:meth:`DeltaLog.metadata_changes`: a range's schema and change-data-feed changes). delta-rs gives
  snapshots and commit infos, not a commit's actions;
- one commit's timestamp (:meth:`DeltaLog.commit_timestamp`): the versions committed in an interval are
  found by binary search over commit files (log₂ n reads), where delta-rs's history would read every
  commit from the newest down to the interval.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, cast

from lakefeed.azure import delta_rs_url
from lakefeed.errors import ChangeDataError
from lakefeed.jsonio import parse_json
from lakefeed.storage import StoreBase

if TYPE_CHECKING:
    from deltalake import DeltaTable

LOG_DIR = "_delta_log"
_COMMIT = re.compile(r"^(\d{20})\.json$")


_DATA_ACTIONS = ("add", "remove", "cdc")


def changes_rows(actions: list[dict[str, Any]]) -> bool:
    """A commit's actions changed the table's rows: they add, remove or record changes of data files (a
    schema change, a table creation with no rows, OPTIMIZE or a property change do not)."""
    return any(
        action.get(kind, {}).get("dataChange", kind == "cdc")
        for action in actions
        for kind in _DATA_ACTIONS
        if kind in action
    )


@dataclass(frozen=True)
class TableState:
    """What a Delta table at a path is now: its id, its latest version, and any RESTORE committed
    after a given version (``(version, restored_to)``; ``restored_to`` None when restored by timestamp)."""

    table_id: str
    latest_version: int
    restores: tuple[tuple[int, int | None], ...] = ()


class DeltaLog:
    """The transaction log of the Delta table at ``store``'s root."""

    def __init__(self, store: StoreBase):
        self.store = store

    @property
    def root(self) -> str:
        return self.store.root

    @property
    def _delta_options(self) -> dict[str, str] | None:
        return getattr(self.store, "delta_storage_options", None)

    def commit_versions(self) -> list[int]:
        versions = []
        for entry in self.store.list(LOG_DIR):
            m = _COMMIT.match(entry.name)
            if m:
                versions.append(int(m.group(1)))
        return sorted(versions)

    def latest_version(self) -> int | None:
        """Newest committed version, or None when there is no Delta table at the root."""
        versions = self.commit_versions()
        return versions[-1] if versions else None

    def actions(self, version: int) -> list[dict[str, Any]]:
        path = f"{LOG_DIR}/{version:020d}.json"
        try:
            raw = self.store.read_bytes(path)
        except FileNotFoundError:
            raise ChangeDataError(f"{self.store.url(path)} does not exist (removed by log cleanup?)") from None
        where = self.store.url(path)
        try:
            text = raw.decode()
        except UnicodeDecodeError as exc:
            raise ChangeDataError(f"{where}: malformed commit ({exc})") from None
        return [parse_json(line, where, ChangeDataError) for line in text.splitlines() if line.strip()]

    def commit_info(self, version: int) -> dict[str, Any]:
        """The ``commitInfo`` action of a commit (empty when the writer recorded none)."""
        for action in self.actions(version):
            if "commitInfo" in action:
                info: dict[str, Any] = action["commitInfo"]
                return info
        return {}

    def commit_infos_after(self, after: int, most: int) -> list[tuple[int, dict[str, Any]]]:
        """``(version, commitInfo)`` of the commits after ``after``, oldest first, at most ``most``: read from
        ``after + 1`` on until a commit file is not there (commits are numbered without gaps; a table with no
        commit yet starts at 0)."""
        found: list[tuple[int, dict[str, Any]]] = []
        for version in range(after + 1, after + 1 + most):
            try:
                raw = self.store.read_bytes(f"{LOG_DIR}/{version:020d}.json")
            except FileNotFoundError:
                break
            where = self.store.url(f"{LOG_DIR}/{version:020d}.json")
            # Only the commitInfo action is parsed (a first load's commit holds an add action per data file).
            infos = (line for line in raw.decode(errors="replace").splitlines() if line.startswith('{"commitInfo"'))
            info = next(infos, None)
            found.append((version, parse_json(info, where, ChangeDataError)["commitInfo"] if info else {}))
        return found

    def commit_timestamp(self, version: int) -> int | None:
        """Milliseconds since the epoch a commit was made at (its in-commit timestamp when enabled)."""
        info = self.commit_info(version)
        value = info.get("inCommitTimestamp", info.get("timestamp"))
        return int(value) if value is not None else None

    def metadata_changes(self, first: int, last: int) -> list[tuple[int, dict[str, Any]]]:
        """``metaData`` actions committed in versions ``first..last``."""
        return [
            (version, action["metaData"])
            for version in range(first, last + 1)
            for action in self.actions(version)
            if "metaData" in action
        ]

    def snapshot(self, version: int | None = None) -> DeltaTable | None:
        """The table as of ``version`` (default the latest), loaded by delta-rs; None when there is no Delta
        table at the root or ``version`` is past its latest. A version the log can no longer rebuild (log
        cleanup) raises delta-rs's ``DeltaError``."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        if version is not None:
            latest = self.latest_version()
            if latest is None or version > latest:
                return None
        try:
            return DeltaTable(delta_rs_url(self.store.root), version=version, storage_options=self._delta_options)
        except TableNotFoundError:
            if version is None and self.latest_version() is None:
                return None
            raise
        except DeltaError:
            self._name_a_malformed_commit(version)
            raise

    def _name_a_malformed_commit(self, version: int | None) -> None:
        """Raise naming the commit file delta-rs could not parse, if one up to ``version`` is (its errors
        name no file); return when every commit reads."""
        for committed in reversed(self.commit_versions()):
            if version is None or committed <= version:
                self.actions(committed)

    def properties(self) -> dict[str, str] | None:
        """The table's properties as of its latest version; None when there is no Delta table at the root."""
        table = self.snapshot()
        return None if table is None else dict(table.metadata().configuration or {})

    def table_state(self, version: int | None = None) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """Table properties and schema fields as of ``version``, default the latest."""
        table = self.snapshot(version)
        if table is None:
            raise ChangeDataError(f"{self.root} has no Delta table version {'latest' if version is None else version}")
        return dict(table.metadata().configuration or {}), _fields(table)

    def bytes_in_range(self, column: str, low: Any, high: Any) -> int:
        """About how many bytes of the table's data files (latest version) hold ``column`` values in
        [``low``, ``high``], by the files' statistics: a file whose range lies outside counts nothing, a
        file of integers or dates the share of its range that overlaps (values assumed even), any other
        overlapping file (or one without statistics) all of it. 0 when there is no table. What a MERGE on
        ``column`` filtered to that range still reads and joins (delta-rs reads the file list)."""
        import pyarrow as pa

        table = self.snapshot()
        if table is None:
            return 0
        files = pa.table(table.get_add_actions(flatten=True))
        names = [f"min.{column}", f"max.{column}"]
        sizes = files.column("size_bytes").to_pylist()
        if not all(name in files.column_names for name in names):
            return int(sum(sizes))
        total = 0.0
        for size, least, most in zip(sizes, *(files.column(n).to_pylist() for n in names), strict=True):
            total += size * _share_in_range(least, most, low, high)
        return int(total)

    def table_id(self, version: int | None = None) -> str | None:
        """``metaData.id`` of the table at the root (as of ``version``, default the latest): a dropped and
        recreated table gets a new one, and so does one a REPLACE rebuilt. None when there is no Delta
        table there (or no such version)."""
        table = self.snapshot(version)
        return None if table is None else str(table.metadata().id)

    def latest_metadata(self, version: int | None = None) -> dict[str, Any] | None:
        """The table's ``metaData`` as of ``version`` (default the latest), in the log's own field names
        (``id``, ``configuration``, ``schemaString``); None when there is no table or no such version."""
        table = self.snapshot(version)
        if table is None:
            return None
        metadata = table.metadata()
        return {
            "id": metadata.id,
            "configuration": dict(metadata.configuration or {}),
            "schemaString": table.schema().to_json(),
        }

    def history(self, after: int) -> list[dict[str, Any]]:
        """The commit infos of the versions after ``after``, oldest first, each with its ``version`` (read by
        delta-rs, newest first, back to ``after``; versions log cleanup removed are absent). [] when there
        is no table or nothing after ``after``."""
        latest = self.latest_version()
        if latest is None or latest <= after:
            return []
        table = self.snapshot()
        if table is None:
            return []
        newest = table.version()  # a commit may have landed since the listing
        infos = [info for info in table.history(limit=max(0, newest - after)) if int(info.get("version", -1)) > after]
        return sorted(infos, key=lambda info: int(info["version"]))

    def state(self, restores_after: int | None = None) -> TableState | None:
        """The table's id and latest version, and the RESTOREs committed after version
        ``restores_after`` (commits already removed by log cleanup are not looked at)."""
        versions = self.commit_versions()
        if not versions:
            return None
        restores = []
        if restores_after is not None:
            for info in self.history(restores_after):
                if info.get("operation") == "RESTORE":
                    target = (info.get("operationParameters") or {}).get("version")
                    restores.append((int(info["version"]), int(target) if target not in (None, "") else None))
        # A table with commits has a metaData.id (unless it vanished since they were listed).
        table_id = cast(str, self.table_id())
        return TableState(table_id=table_id, latest_version=versions[-1], restores=tuple(restores))

    def versions_committed_between(self, start_ms: int, end_ms: int) -> tuple[int, int] | None:
        """``(first, last)`` of the versions committed in ``[start_ms, end_ms)``, or None when there is
        none. Two binary searches: like Delta's own time travel, this takes commit timestamps to be
        non-decreasing along the log."""
        versions = self.commit_versions()
        if not versions:
            return None
        first = _first_at_or_after(self, versions, start_ms)
        after = _first_at_or_after(self, versions, end_ms)
        if first >= after:
            return None
        return versions[first], versions[after - 1]


def _fields(table: DeltaTable) -> list[dict[str, Any]]:
    fields: list[dict[str, Any]] = json.loads(table.schema().to_json())["fields"]
    return fields


def _first_at_or_after(log: DeltaLog, versions: list[int], moment_ms: int) -> int:
    low, high = 0, len(versions)
    while low < high:
        middle = (low + high) // 2
        stamp = log.commit_timestamp(versions[middle])
        if stamp is not None and stamp < moment_ms:
            low = middle + 1
        else:
            high = middle
    return low


def _share_in_range(least: Any, most: Any, low: Any, high: Any) -> float:
    """The share of a file's values in [least, most] that lie in [low, high] (values assumed even for
    integers and dates, else 1 when the ranges meet); 1 when a bound is unknown or not comparable.

    >>> _share_in_range(0, 99, 50, 200), _share_in_range(0, 99, 100, 200), _share_in_range("a", "m", "k", "z")
    (0.5, 0.0, 1.0)
    """
    if least is None or most is None or low is None or high is None:
        return 1.0
    try:
        if most < low or least > high:
            return 0.0
    except TypeError:  # statistics of another Python type than the bounds (a timestamp's zone, say)
        return 1.0
    if isinstance(least, date) and isinstance(most, date):
        least, most = least.toordinal(), most.toordinal()
        low, high = low.toordinal(), high.toordinal()
    bounds = (least, most, low, high)
    if all(isinstance(v, int) and not isinstance(v, bool) for v in bounds):
        first, last, start, end = (int(v) for v in bounds)
        return (min(last, end) - max(first, start) + 1) / (last - first + 1)
    return 1.0
