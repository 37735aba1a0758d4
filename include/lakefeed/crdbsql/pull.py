"""Pull one range of a CockroachDB changefeed over SQL and stage it in the cloud storage sink's layout.

A range ``(after, through]`` of ``updated`` timestamps is one bounded core changefeed on a dedicated
connection (:meth:`lakefeed.sql.SqlEndpoint.connect`)::

    CREATE CHANGEFEED FOR orders, customers
      WITH updated, resolved, format = 'json', envelope = 'wrapped',
           cursor = '<after>', end_time = '<through.next()>', min_checkpoint_frequency = '…'

``cursor`` emits the changes after it, ``end_time`` those strictly before it (CockroachDB's
``kvfeed/kv_feed.go`` ``checkCopyBoundary``) and then completes, its last resolved row at
``end_time.Prev()`` = ``through``: so consecutive ranges ``(a, b]``, ``(b, c]`` meet without a gap or an
overlap, and the checkpoint is the last ``through``. The first range has no ``after``: an initial scan at
``through`` (``cursor = '<through>', initial_scan, end_time = '<through.next()>'``: ``initial_scan_only``
refuses ``updated`` and ``resolved``, CockroachDB's ``InitialScanOnlyUnsupportedOptions``), every row with
``updated`` = ``through``, then the last resolved row at ``through``. The
older statement form ``EXPERIMENTAL CHANGEFEED FOR`` is the same feed (one AST in CockroachDB); which one
is sent depends on the server's version or the configuration (:func:`statement_form`).

Rows are ``(table, key, value)``; resolved rows have ``table`` and ``key`` NULL. Each data row becomes one
line of a sink data file, the key put into the wrapped envelope as the cloud storage sink writes it
(``key_in_value``), so the CockroachDB job applies a pulled range exactly as it applies sink files: one
apply path. The staged files (:class:`Staging`) sit in a sink-layout folder, ``daily`` partitions:

    2026-03-14/<through or after.next(), 33 digits>-<session>-0-0-<file id>-<table>-1.ndjson
    2026-03-14/<through, 33 digits>.RESOLVED

An initial scan's files are named by ``through`` and follow a RESOLVED file of their own at
``through.Prev()``, so its range reads as ``(through.Prev(), through]``: the scan alone, nothing staged
before it. ``session`` is fixed by the pipeline and the range, so a retried pull first removes what a killed try of
the same range left, then writes the same names; the RESOLVED file is written last, after every data
file, so a range without it was never pulled whole (the job refuses it). A range pulled again (a
backfill) writes files the ledger of applied files may already hold: the ``updated`` guard makes every
repeat a no-op.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lakefeed.crdb.hlc import Hlc
from lakefeed.errors import ConfigError, DataLossError, FeedConfigError, FeedCorruptError
from lakefeed.sql import SqlEndpoint
from lakefeed.storage import Store

log = logging.getLogger(__name__)

EXPERIMENTAL, CREATE, AUTO = "experimental", "create", "auto"
STATEMENT_FORMS = (AUTO, EXPERIMENTAL, CREATE)
# EXPERIMENTAL CHANGEFEED FOR is documented as deprecated from v25.2 on, in favour of sinkless CREATE
# CHANGEFEED (which every version since v2.1 parses, undocumented before); older servers get the form their
# documentation names.
CREATE_FROM_VERSION = (25, 2)
MAX_LOGICAL = 2147483647  # hlc.Timestamp.Prev of a timestamp with logical 0 takes math.MaxInt32
FILE_SIZE = 16 << 20  # the sink's default file_size
_VERSION = re.compile(r"v(\d+)\.(\d+)")
_GC = (
    re.compile(r"cursor (?P<cursor>[0-9.,]+) is older than the GC threshold (?P<threshold>[0-9.,]+)"),
    re.compile(r"batch timestamp (?P<cursor>[0-9.,]+) must be after replica GC threshold (?P<threshold>[0-9.,]+)"),
)
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_TABLE = re.compile(r'^(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"]+")(?:\.(?:[A-Za-z_][A-Za-z0-9_$]*|"[^"]+")){0,2}$')


class PullIncompleteError(Exception):
    """The changefeed ended before it resolved the range's end: retried (nothing was staged as whole)."""


def next_of(stamp: Hlc) -> Hlc:
    """The timestamp right after ``stamp`` (``hlc.Timestamp.Next``; the inverse of ``Prev``)."""
    return Hlc(stamp.wall + 1, 0) if stamp.logical >= MAX_LOGICAL else Hlc(stamp.wall, stamp.logical + 1)


def prev_of(stamp: Hlc) -> Hlc:
    """``hlc.Timestamp.Prev``: the last timestamp before ``stamp``."""
    return Hlc(stamp.wall, stamp.logical - 1) if stamp.logical > 0 else Hlc(stamp.wall - 1, MAX_LOGICAL)


def check_table_name(name: str, where: str) -> str:
    """A table as a changefeed target: ``name``, ``schema.name`` or ``db.schema.name`` (quoted parts allowed),
    refused otherwise (it goes into the statement)."""
    if not _TABLE.match(name):
        raise ConfigError(f"{where}: {name!r} is not a table name (name, schema.name or database.schema.name)")
    return name


def topic_of(table: str) -> str:
    """The topic a configured table's rows carry (the ``table`` column): its own name, folded to lower case
    unless quoted, as SQL folds names."""
    last: str = re.findall(r'"[^"]+"|[^.]+', table)[-1]
    return last[1:-1] if last.startswith('"') else last.lower()


def check_duration(text: str, where: str) -> str:
    """A duration as CockroachDB's options take it (``5s``, ``500ms``, ``1m30s``), refused otherwise (it goes
    into the statement)."""
    if not _DURATION.match(text):
        raise ConfigError(f"{where}: {text!r} is not a duration (for example 5s, 500ms or 1m30s)")
    return text


def statement_form(configured: str, crdb_version: str) -> str:
    """``experimental`` or ``create``: as configured, or (``auto``) by the server's version string."""
    if configured != AUTO:
        return configured
    found = _VERSION.search(crdb_version or "")
    if found and (int(found[1]), int(found[2])) >= CREATE_FROM_VERSION:
        return CREATE
    return EXPERIMENTAL


def changefeed_statement(
    form: str,
    tables: Iterable[str],
    after: Hlc | None,
    through: Hlc,
    min_checkpoint_frequency: str | None = None,
) -> str:
    """The bounded changefeed of ``(after, through]`` (``after`` None: the initial scan at ``through``)."""
    head = "EXPERIMENTAL CHANGEFEED FOR" if form == EXPERIMENTAL else "CREATE CHANGEFEED FOR"
    options = ["updated", "resolved", "format = 'json'", "envelope = 'wrapped'"]
    if after is None:  # initial_scan_only refuses updated and resolved (InitialScanOnlyUnsupportedOptions)
        options += [f"cursor = '{through}'", "initial_scan", f"end_time = '{next_of(through)}'"]
    else:
        options += [f"cursor = '{after}'", f"end_time = '{next_of(through)}'"]
        if min_checkpoint_frequency:
            options.append(
                f"min_checkpoint_frequency = '{check_duration(min_checkpoint_frequency, 'min_checkpoint_frequency')}'"
            )
    return f"{head} {', '.join(tables)} WITH {', '.join(options)}"


def cluster_time(endpoint: SqlEndpoint) -> tuple[Hlc, str]:
    """The cluster's clock (``cluster_logical_timestamp()``) and its version string (``crdb_version``)."""
    with endpoint.connect("lakefeed-plan") as connection:
        (stamp,) = connection.execute("SELECT cluster_logical_timestamp()").fetchone()
        version = connection.info.parameter_status("crdb_version") or ""
        if not version:
            (version,) = connection.execute("SELECT version()").fetchone()
    return Hlc.parse(str(stamp)), str(version)


def session_of(pipeline_id: str, after: Hlc | None, through: Hlc) -> str:
    """The uniquer of a range's staged files: fixed by the pipeline and the range (16 hex digits)."""
    return hashlib.sha256(f"{pipeline_id}|{after}|{through}".encode()).hexdigest()[:16]


def _folder(stamp: Hlc) -> str:
    return f"{stamp.datetime():%Y-%m-%d}"


def _resolved_key(stamp: Hlc) -> str:
    return f"{_folder(stamp)}/{stamp.file_timestamp()}.RESOLVED"


@dataclass
class Staging:
    """The staged files of one range, written in the sink's layout under ``store``'s root."""

    store: Store
    pipeline_id: str
    after: Hlc | None
    through: Hlc
    file_size: int = FILE_SIZE
    _buffers: dict[str, list[bytes]] = field(default_factory=dict)
    _sizes: dict[str, int] = field(default_factory=dict)
    _file_id: int = 0
    written: list[str] = field(default_factory=list)
    lines: int = 0
    staged_bytes: int = 0

    @property
    def session(self) -> str:
        return session_of(self.pipeline_id, self.after, self.through)

    @property
    def name_stamp(self) -> Hlc:
        """What the data files are named by: the inclusive lower bound of their rows' ``updated``."""
        return self.through if self.after is None else next_of(self.after)

    @property
    def resolved_key(self) -> str:
        return _resolved_key(self.through)

    @property
    def lower_bound(self) -> Hlc:
        """The RESOLVED timestamp the range's files follow, written with the range (a backfill may start
        anywhere): ``after``, or for an initial scan the instant before it (so the job reads the scan's
        files and nothing staged before)."""
        return self.after if self.after is not None else prev_of(self.through)

    def clear(self) -> list[str]:
        """Remove the data files an earlier try of this range left (named by its session)."""
        removed = []
        folder = _folder(self.name_stamp)
        for entry in self.store.list(folder):
            if not entry.is_dir and f"-{self.session}-" in entry.name:
                self.store.remove(f"{folder}/{entry.name}")
                removed.append(f"{folder}/{entry.name}")
        # RESOLVED files stay: their content is fixed by their name, and other ranges end or start at them.
        return removed

    def add(self, topic: str, key: bytes, value: bytes) -> None:
        """One message: the value's wrapped envelope with the key put in, as a sink line."""
        if not value.startswith(b"{"):
            raise FeedCorruptError(f"a changefeed row of {topic} whose value is not a JSON object: {value[:80]!r}")
        line = b'{"key": ' + key + (b", " + value[1:] if value.strip() != b"{}" else b"}") + b"\n"
        buffer = self._buffers.setdefault(topic, [])
        buffer.append(line)
        self._sizes[topic] = self._sizes.get(topic, 0) + len(line)
        self.lines += 1
        if self._sizes[topic] > self.file_size:
            self._flush(topic)

    def _flush(self, topic: str) -> None:
        lines = self._buffers.pop(topic, [])
        self._sizes.pop(topic, None)
        if not lines:
            return
        if "/" in topic or topic.startswith("."):
            raise FeedCorruptError(f"a changefeed row names the table {topic!r}, which cannot name a file")
        name = f"{self.name_stamp.file_timestamp()}-{self.session}-0-0-{self._file_id:08x}-{topic}-1.ndjson"
        self._file_id += 1
        data = b"".join(lines)
        key = f"{_folder(self.name_stamp)}/{name}"
        self.store.write_bytes(key, data)
        self.written.append(key)
        self.staged_bytes += len(data)

    def finish(self) -> None:
        """Write what is buffered, then the RESOLVED file that makes the range whole."""
        for topic in sorted(self._buffers):
            self._flush(topic)
        for stamp in (self.lower_bound, self.through):  # the job reads the data files between the two
            resolved = json.dumps({"resolved": str(stamp)}, separators=(",", ":")).encode()
            self.store.write_bytes(_resolved_key(stamp), resolved)
            self.written.append(_resolved_key(stamp))


@dataclass(frozen=True)
class Pulled:
    """What a pull staged: rows, resolved rows, files, bytes, seconds, and the statement form used."""

    after: str | None
    through: str
    messages: int
    resolved_rows: int
    files: int
    bytes: int
    seconds: float
    statement_form: str
    removed: int

    def describe(self) -> dict[str, Any]:
        return {
            "afterResolved": self.after,
            "throughResolved": self.through,
            "messages": self.messages,
            "resolvedRows": self.resolved_rows,
            "files": self.files,
            "bytes": self.bytes,
            "seconds": self.seconds,
            "statementForm": self.statement_form,
            "removedFromEarlierTry": self.removed,
        }


def pull(
    endpoint: SqlEndpoint,
    tables: list[str],
    staging: Staging,
    configured_form: str = AUTO,
    min_checkpoint_frequency: str | None = None,
) -> Pulled:
    """Run the range's changefeed on a dedicated connection and stage its rows (see the module's docstring).

    Refused (no retry): a cursor older than the cluster's GC threshold (:class:`DataLossError`, naming the
    tables and the gap), a statement the server rejects. Retried: a connection dropped mid-stream, or a
    changefeed that ended before resolving ``through`` (:class:`PullIncompleteError`). Closing the
    connection is what cancels a core changefeed, so it is closed whatever happens."""
    import psycopg

    clock = time.perf_counter()
    removed = staging.clear()
    if removed:
        log.info("removed %d file(s) an earlier try of this range left: %s", len(removed), ", ".join(removed[:5]))
    connection = endpoint.connect("lakefeed-pull")
    try:
        version = connection.info.parameter_status("crdb_version") or ""
        form = statement_form(configured_form, version)
        statement = changefeed_statement(form, tables, staging.after, staging.through, min_checkpoint_frequency)
        log.info("%s: %s", endpoint.where, statement)
        newest_resolved: Hlc | None = None
        resolved_rows = 0
        try:
            with connection.cursor() as cursor:
                try:
                    for table, key, value in cursor.stream(statement):
                        if table is None:
                            newest_resolved = _resolved(value, endpoint)
                            resolved_rows += 1
                            continue
                        staging.add(str(table), bytes(key), bytes(value))
                except Exception as exc:
                    if not isinstance(exc, psycopg.Error):
                        # Closed first: psycopg would otherwise read the rest of the stream before it let go.
                        connection.close()
                    raise
        except psycopg.OperationalError as exc:
            raise PullIncompleteError(
                f"{endpoint.where}: the connection failed while the changefeed of ({staging.after}, "
                f"{staging.through}] streamed ({_first_line(exc)}); nothing of this range is staged as whole, "
                f"and a retry pulls it again"
            ) from None
        except psycopg.Error as exc:
            raise _refusal(exc, endpoint, tables, staging) from None
    finally:
        connection.close()
    if newest_resolved is None or newest_resolved < staging.through:
        raise PullIncompleteError(
            f"{endpoint.where}: the changefeed of ({staging.after}, {staging.through}] ended with its newest "
            f"resolved timestamp at {newest_resolved}, short of {staging.through}; nothing is staged as whole"
        )
    staging.finish()
    return Pulled(
        after=str(staging.after) if staging.after else None,
        through=str(staging.through),
        messages=staging.lines,
        resolved_rows=resolved_rows,
        files=len(staging.written),
        bytes=staging.staged_bytes,
        seconds=round(time.perf_counter() - clock, 3),
        statement_form=form,
        removed=len(removed),
    )


def _resolved(value: Any, endpoint: SqlEndpoint) -> Hlc:
    try:
        document = json.loads(bytes(value))
        return Hlc.parse(document["resolved"])
    except (ValueError, KeyError, TypeError) as exc:
        raise FeedCorruptError(
            f"{endpoint.where}: a resolved row that is not one ({exc}): {bytes(value)[:80]!r}"
        ) from None


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _refusal(error: Any, endpoint: SqlEndpoint, tables: list[str], staging: Staging) -> Exception:
    """The refusal a database error makes: retention loss (the cursor is past the GC threshold) named as
    such, any other error with its SQLSTATE."""
    message = getattr(getattr(error, "diag", None), "message_primary", None) or _first_line(error)
    for pattern in _GC:
        found = pattern.search(message)
        if found:
            threshold = _threshold(found["threshold"])
            gap = f"{threshold} ({threshold.datetime()})" if threshold else found["threshold"]
            return DataLossError(
                f"{endpoint.where}: the changes of {', '.join(tables)} after {staging.after} "
                f"({staging.after.datetime() if staging.after else '-'}) are gone from the cluster: its GC threshold "
                f"is {gap}, so the changefeed cannot start at the checkpoint's cursor (CockroachDB: {message}). "
                f"Going on skips those changes: trigger the DAG with reset_checkpoint=true for a new initial scan, "
                f"which is recorded in the checkpoint; or raise the tables' gc.ttlseconds so this does not recur."
            )
    code = getattr(error, "sqlstate", None) or "?"
    if code.startswith(_REFUSED_CLASSES):
        return FeedConfigError(f"{endpoint.where} refused the changefeed ({code}: {message})")
    return PullIncompleteError(  # internal, unavailable, retryable: another try may get through
        f"{endpoint.where}: the changefeed of ({staging.after}, {staging.through}] failed ({code}: {message}); "
        f"nothing of this range is staged as whole, and a retry pulls it again"
    )


# SQLSTATE classes no retry changes: syntax or access (42), not supported (0A), authorization (28), data (22),
# unknown catalog or schema (3D, 3F).
_REFUSED_CLASSES = ("42", "0A", "28", "22", "3D", "3F")


def _threshold(text: str) -> Hlc | None:
    """A GC threshold as CockroachDB's messages write it: ``<wall ns>``, ``<wall ns>.<logical>`` or
    ``<seconds>.<nanoseconds>,<logical>`` (``hlc.Timestamp.String``); None when it is none of them."""
    text = text.rstrip(".,")
    try:
        if "," in text:
            seconds, rest = text.split(".", 1)
            nanos, logical = rest.split(",", 1)
            return Hlc(int(seconds) * 1_000_000_000 + int(nanos.ljust(9, "0")[:9]), int(logical))
        if "." in text:
            return Hlc.parse(text)
        return Hlc(int(text), 0)
    except ValueError:
        return None
