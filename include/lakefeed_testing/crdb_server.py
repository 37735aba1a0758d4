"""A CockroachDB stand-in on the PostgreSQL wire protocol: core changefeeds over SQL, as CockroachDB answers them.

CockroachDB cannot be installed here, so the SQL-pulled source (:mod:`lakefeed.crdbsql`) is tested
against this server, through the real client library (psycopg), on a simulated cluster whose history
is the one the sink tests use (:class:`lakefeed_testing.crdb_generator.SinkTruth` ``history``): both
sources are checked against one ground truth. Each behaviour names its source in CockroachDB
(``cockroachdb/cockroach``, paths below ``pkg/``) or the seed
(``shared/seeds/004_f4eb90c991b1db18.txt``, "EXPERIMENTAL CHANGEFEED FOR"):

- statements ``EXPERIMENTAL CHANGEFEED FOR t[, …] [WITH …]`` and sinkless ``CREATE CHANGEFEED FOR
  [TABLE] t[, …] [WITH …]`` (no ``INTO``): one AST, one behaviour (``sql/parser/sql.y``
  ``create_changefeed_stmt``, ``SinkURI == nil``); ``CREATE CHANGEFEED`` with ``INTO`` is refused here;
- result columns ``table`` STRING, ``key`` BYTES, ``value`` BYTES (``ccl/changefeedccl/changefeed_stmt.go``
  ``sinklessHeader``); one ``DataRow`` per message, flushed as it is produced (``avoidBuffering``;
  ``sql/pgwire/command_result.go``); the command tag ``EXPERIMENTAL CHANGEFEED <rows>`` for both forms
  (``StatementTag``);
- rows: ``table`` the table's name, ``key`` the primary key as a JSON array, ``value`` the wrapped
  envelope ``{"after": {…}, "updated": "<wall>.<logical>"}`` (``after`` null for a delete; keys sorted,
  ``": "`` and ``", "`` separators; ``ccl/changefeedccl/encoder_test.go`` ``TestEncoders``); no key in the
  value (``key_in_value`` is forced only for cloud storage and webhook sinks: ``requiresKeyInValue``);
  ``resolved`` rows with ``table`` and ``key`` NULL and ``value`` ``{"resolved":"<wall>.<logical>"}``
  (``sink.go`` ``bufferSink.EmitResolvedTimestamp``); timestamps as ``%d.%010d`` (``util/hlc``
  ``AsOfSystemTime``);
- ``cursor``: changes after it, no initial scan unless ``initial_scan`` asks for one (at the cursor);
  no cursor: an initial scan at the statement time (seed, Options); ``initial_scan = 'only'`` /
  ``initial_scan_only``: the scan, then completion (the end time is the statement time);
- ``end_time``: changes strictly before it (``kvfeed/kv_feed.go`` ``checkCopyBoundary``:
  ``e.Timestamp().Less(boundary)``), the last resolved row at ``end_time.Prev()``
  (``maybeEmitResolved``), then normal completion (``coreChangefeed`` returns nil); a future end time
  waits for the cluster's clock (``asof.OptionAllowFutureTimestamp``);
- errors, with CockroachDB's texts: a cursor older than the GC threshold (``could not create changefeed:
  cursor … is older than the GC threshold …``, hint ``use a more recent cursor``; ``rowFnLogErrors``), a
  cursor in the future (``AS OF SYSTEM TIME: cannot specify timestamp in the future``), an end time before
  the statement time (``validateDetailsAndOptions``), ``initial_scan_only`` with ``end_time``,
  ``resolved``, ``updated``, ``diff`` or ``mvcc_timestamp`` (``InitialScanOnlyUnsupportedOptions``), an
  unknown option (``sql/exprutil/kv_string_opt.go``: ``invalid option "…"``), ``format=avro`` without a
  registry (``encoder_avro.go``), rangefeeds disabled (``validateSettings``), an unknown table
  (``relation "…" does not exist``, 42P01), a wrong password (28P01). Errors without a pgcode in
  CockroachDB go out as ``XXUUU`` (``pgcode.Uncategorized``);
- faults: the connection dropped mid-stream (a gateway node lost), and the repeats of an in-process retry
  (since v22.2 a core changefeed retries transient errors from its in-memory checkpoint: what it sent
  since the last resolved timestamp comes again), besides duplicates inside the stream;
- connection start: ``ParameterStatus`` as ``sql/pgwire/conn.go`` ``statusReportParams`` sends it
  (``server_version`` 13.0.0, ``crdb_version``), ``SELECT version()``, ``SHOW crdb_version``,
  ``SELECT cluster_logical_timestamp()`` (DECIMAL, ``builtins.go``).

Not reproduced: other envelopes and formats (``avro``, ``key_only``, ``row``, ``bare``, ``diff``,
``mvcc_timestamp``, ``split_column_families``), ``CANCEL QUERY``, TLS and SCRAM (cleartext password
only), privileges, schema changes' effect on the statement, real ranges (rows are emitted in timestamp
order per key, keys interleaved), and ``min_checkpoint_frequency``/``resolved`` intervals in wall-clock
time (a resolved row every ``resolved_every`` changes).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from lakefeed.crdb.hlc import NANOS, Hlc
from lakefeed_testing.crdb_generator import Change
from lakefeed_testing.pgwire import BYTEA, NUMERIC, TEXT, Column, Dropped, Result, Session, SqlError, WireServer

CHANGEFEED_COLUMNS = [Column("table", TEXT), Column("key", BYTEA), Column("value", BYTEA)]
UNCATEGORIZED = "XXUUU"
# Options a core changefeed accepts (``changefeedbase/options.go``), and those this server reproduces.
KNOWN_OPTIONS = {
    "avro_schema_prefix", "compression", "confluent_schema_registry", "cursor", "diff", "end_time", "envelope",
    "format", "full_table_name", "initial_scan", "initial_scan_only", "key_in_value", "min_checkpoint_frequency",
    "mvcc_timestamp", "no_initial_scan", "resolved", "schema_change_events", "schema_change_policy",
    "split_column_families", "topic_in_value", "updated", "virtual_columns", "on_error", "kafka_sink_config",
    "webhook_sink_config", "protect_data_from_gc_on_pause", "metrics_label", "lagging_ranges_threshold",
    "lagging_ranges_polling_interval", "key_column", "unordered", "headers_json_column_name", "execution_locality",
    "encode_json_value_null_as_object",
}  # fmt: skip
REPRODUCED = {"cursor", "end_time", "envelope", "format", "initial_scan", "initial_scan_only", "no_initial_scan",
              "min_checkpoint_frequency", "resolved", "updated", "key_in_value"}  # fmt: skip
_FEED = re.compile(
    r"^\s*(?:EXPERIMENTAL\s+CHANGEFEED|CREATE\s+CHANGEFEED)\s+FOR\s+(?P<targets>.+?)"
    r"(?:\s+INTO\s+(?P<into>'[^']*'))?(?:\s+WITH\s+(?P<options>.*?))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_OPTION = re.compile(r"\s*([A-Za-z_]+)\s*(?:=\s*('(?:[^']|'')*'|[^,\s)]+))?\s*(?:,|$)")


@dataclass
class Faults:
    """What goes wrong in the next changefeeds (each fires once, then resets)."""

    drop_after_rows: int | None = None  # the connection closes after this many data rows
    retry_after_rows: int | None = None  # an in-process retry: rows since the last resolved row come again
    duplicate_every: int | None = None  # every n-th data row is sent twice in a row
    rangefeeds_disabled: bool = False


@dataclass
class Cluster:
    """The simulated cluster: committed changes (its tables' history), its clock and GC threshold."""

    history: list[Change]
    now: Callable[[], Hlc]
    gc_threshold: Hlc = field(default_factory=lambda: Hlc(0, 0))
    version: str = "v24.1.4"
    password: str | None = None
    user: str = "root"
    resolved_every: int = 50
    faults: Faults = field(default_factory=Faults)  # the next changefeed's (then cleared)
    every_feed: Faults = field(default_factory=Faults)  # repeats in every changefeed (duplicates, retries)
    wait_timeout: float = 30.0  # how long a future end_time is waited for
    # Test-only: ``SET CLUSTER SETTING lakefeed.test_clock = '<hlc>'`` moves the clock (the demo's server).
    set_clock: Callable[[Hlc], None] | None = None

    def tables(self) -> set[str]:
        return {change.topic for change in self.history}

    def version_string(self) -> str:
        return f"CockroachDB CCL {self.version} (x86_64-pc-linux-gnu, built 2024/06/10 17:25:40, go1.22.5)"


class CockroachEngine:
    """Answers a CockroachDB session's statements from a :class:`Cluster` (see the module's docstring)."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster

    def parameters(self) -> dict[str, str]:
        return {
            "server_version": "13.0.0",
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "application_name": "",
            "DateStyle": "ISO, MDY",
            "IntervalStyle": "postgres",
            "is_superuser": "on",
            "TimeZone": "UTC",
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
            "crdb_version": self.cluster.version_string(),
            "session_authorization": self.cluster.user,
        }

    def password_of(self, user: str) -> str | None:
        return self.cluster.password

    def describe(self, sql: str) -> list[Column]:
        text = sql.strip().rstrip(";").strip().lower()
        if _FEED.match(sql):
            return CHANGEFEED_COLUMNS
        if text == "select cluster_logical_timestamp()":
            return [Column("cluster_logical_timestamp", NUMERIC)]
        if text == "select version()":
            return [Column("version", TEXT)]
        if text == "show crdb_version":
            return [Column("crdb_version", TEXT)]
        return []

    def execute(self, sql: str, session: Session) -> Result:
        text = sql.strip().rstrip(";").strip()
        lowered = text.lower()
        if lowered == "select cluster_logical_timestamp()":
            return Result(self.describe(sql), iter([[str(self.cluster.now())]]))
        if lowered in ("select version()", "show crdb_version"):
            return Result(self.describe(sql), iter([[self.cluster.version_string()]]))
        clock = re.match(r"(?i)^set cluster setting lakefeed\.test_clock\s*=\s*'([0-9.]+)'$", text)
        if clock and self.cluster.set_clock is not None:
            self.cluster.set_clock(Hlc.parse(clock[1]))
            return Result(tag="SET CLUSTER SETTING")
        if lowered.startswith("set ") or lowered == "select 1":
            return (
                Result(tag="SET") if lowered.startswith("set ") else Result([Column("?column?", TEXT)], iter([["1"]]))
            )
        feed = _FEED.match(text)
        if feed:
            return self._changefeed(feed)
        raise SqlError("42601", f"at or near {text.split()[0].lower() if text else 'EOF'!r}: syntax error")

    # -- the changefeed --
    def _changefeed(self, feed: re.Match[str]) -> Result:
        cluster = self.cluster
        if feed["into"]:
            raise SqlError("0A000", "this test server serves core (sinkless) changefeeds only")
        targets = [_table_name(t) for t in re.split(r"\s*,\s*", re.sub(r"(?i)^TABLE\s+", "", feed["targets"].strip()))]
        for table in targets:
            if table not in cluster.tables():
                raise SqlError("42P01", f'relation "{table}" does not exist')
        options = _options(feed["options"] or "")
        for name in options:
            if name not in KNOWN_OPTIONS:
                raise SqlError(UNCATEGORIZED, f'invalid option "{name}"')
            if name not in REPRODUCED:
                raise SqlError("0A000", f"option {name} is not reproduced by this test server")
        if options.get("format", "json") == "avro" and "confluent_schema_registry" not in options:
            raise SqlError(UNCATEGORIZED, "WITH option confluent_schema_registry is required for format=avro")
        if options.get("format", "json") != "json" or options.get("envelope", "wrapped") != "wrapped":
            raise SqlError("0A000", "this test server emits format=json, envelope=wrapped only")
        now = cluster.now()
        cursor = _hlc_option(options, "cursor")
        end = _hlc_option(options, "end_time")
        scan_mode = (options.get("initial_scan") or "").lower()
        only = "initial_scan_only" in options or scan_mode == "only"
        if only:  # changefeedbase/options.go InitialScanOnlyUnsupportedOptions
            for name in ("end_time", "resolved", "diff", "mvcc_timestamp", "updated"):
                if name in options:
                    raise SqlError(UNCATEGORIZED, f"cannot specify both initial_scan_only and {name}")
        if cursor is not None and cursor > now:
            raise SqlError(
                UNCATEGORIZED, f"AS OF SYSTEM TIME: cannot specify timestamp in the future ({cursor} > {now})"
            )
        statement_time = cursor if cursor is not None else now
        if end is not None and end < statement_time:
            raise SqlError(
                UNCATEGORIZED, f"specified end time {end} cannot be less than statement time {statement_time}"
            )
        if cursor is not None and cursor < cluster.gc_threshold:
            gc = cluster.gc_threshold
            raise SqlError(  # rowFnLogErrors wraps the KV error (BatchTimestampBeforeGCError)
                UNCATEGORIZED,
                f"could not create changefeed: cursor {cursor} is older than the GC threshold {gc.wall}: batch "
                f"timestamp {_kv_text(cursor)} must be after replica GC threshold {_kv_text(gc)} (r64: /Table/104/1)",
                hint="use a more recent cursor",
            )
        if cluster.faults.rangefeeds_disabled and not only:
            raise SqlError(
                UNCATEGORIZED,
                "rangefeeds require the kv.rangefeed.enabled setting. See "
                "https://www.cockroachlabs.com/docs/stable/create-and-configure-changefeeds#enable-rangefeeds",
            )
        if cursor is None:
            scan = True
        elif "no_initial_scan" in options or scan_mode == "no":
            scan = False
        else:
            scan = scan_mode in ("yes", "only") or only or "initial_scan" in options
        faults, cluster.faults = cluster.faults, Faults()
        faults = replace(
            faults,
            duplicate_every=faults.duplicate_every or cluster.every_feed.duplicate_every,
            retry_after_rows=faults.retry_after_rows or cluster.every_feed.retry_after_rows,
        )
        rows = self._rows(
            set(targets),
            statement_time,
            scan,
            statement_time if only else end,
            cursor is not None,
            "resolved" in options,
            "updated" in options,
            "key_in_value" in options,
            faults,
        )
        return Result(CHANGEFEED_COLUMNS, rows, tag="EXPERIMENTAL CHANGEFEED")

    def _rows(
        self,
        tables: set[str],
        start: Hlc,
        scan: bool,
        end: Hlc | None,
        after_start: bool,
        resolved: bool,
        updated: bool,
        key_in_value: bool,
        faults: Faults,
    ) -> Iterator[list[str | bytes | None]]:
        cluster = self.cluster
        history = sorted((c for c in cluster.history if c.topic in tables), key=lambda c: c.stamp)
        messages: list[tuple[Change, Hlc]] = []
        if scan:  # the state at the statement time, each row with the scan's timestamp
            state: dict[tuple[str, str], Change] = {}
            for change in history:
                if change.stamp <= start:
                    state[(change.topic, change.key)] = change
            messages += [(c, start) for c in state.values() if c.after is not None]
        sent = 0
        since_resolved: list[list[str | bytes | None]] = []

        def emit(row: list[str | bytes | None]) -> Iterator[list[str | bytes | None]]:
            nonlocal sent
            yield row
            sent += 1
            since_resolved.append(row)
            if faults.duplicate_every and sent % faults.duplicate_every == 0:
                yield row
            if faults.drop_after_rows is not None and sent >= faults.drop_after_rows:
                raise Dropped()
            if faults.retry_after_rows is not None and sent == faults.retry_after_rows:
                yield from list(since_resolved)  # retried from the in-memory checkpoint: repeats

        def resolved_row(stamp: Hlc) -> list[str | bytes | None]:
            since_resolved.clear()
            return [None, None, json.dumps({"resolved": str(stamp)}, separators=(",", ":")).encode()]

        for change, stamp in _interleaved(messages):
            yield from emit(self._message(change, stamp, updated, key_in_value))
        if scan and resolved:
            yield resolved_row(start)
        if end is not None and end == start:  # initial scan only: done
            return
        changes = [c for c in history if c.stamp > start and (end is None or c.stamp < end)]
        position, last_resolved = 0, start
        deadline = time.monotonic() + cluster.wait_timeout
        while True:
            visible = cluster.now()
            while position < len(changes) and changes[position].stamp <= visible:
                stop = position
                while (
                    stop < len(changes) and stop - position < cluster.resolved_every and changes[stop].stamp <= visible
                ):
                    stop += 1
                chunk, position = changes[position:stop], stop
                for change, stamp in _interleaved([(c, c.stamp) for c in chunk]):
                    yield from emit(self._message(change, stamp, updated, key_in_value))
                upto = chunk[-1].stamp
                if resolved and (position == len(changes) or changes[position].stamp > upto):
                    last_resolved = upto
                    yield resolved_row(upto)
            if end is not None and visible >= end:
                if resolved:
                    yield resolved_row(_prev(end))
                return
            if end is None and resolved and position == len(changes) and visible > last_resolved:
                last_resolved = visible
                yield resolved_row(visible)  # also how a closed connection is noticed: the send fails
            if end is not None and time.monotonic() > deadline:
                raise SqlError(UNCATEGORIZED, f"test server: the cluster's clock did not reach end_time {end}")
            time.sleep(0.05)

    @staticmethod
    def _message(change: Change, stamp: Hlc, updated: bool, key_in_value: bool) -> list[str | bytes | None]:
        parts = [f'"after": {change.after if change.after is not None else "null"}']
        if key_in_value:
            parts.append(f'"key": {json.dumps(json.loads(change.key), separators=(", ", ": "))}')
        if updated:
            parts.append(f'"updated": "{stamp}"')
        return [change.topic, change.key.encode(), ("{" + ", ".join(parts) + "}").encode()]


def _prev(stamp: Hlc) -> Hlc:
    """``hlc.Timestamp.Prev``: the logical part less one, or the wall time less one with the greatest
    logical part (``math.MaxInt32``)."""
    return Hlc(stamp.wall, stamp.logical - 1) if stamp.logical > 0 else Hlc(stamp.wall - 1, 2147483647)


def _interleaved(messages: list[tuple[Change, Hlc]]) -> list[tuple[Change, Hlc]]:
    """Ranges emit independently: each key's changes in order, keys interleaved (stable by a key hash)."""
    return sorted(messages, key=lambda m: zlib.crc32(f"{m[0].topic}/{m[0].key}".encode()))


def _kv_text(stamp: Hlc) -> str:
    """``hlc.Timestamp.String``: ``<seconds>.<nanoseconds, 9 digits>,<logical>``."""
    seconds, nanos = divmod(stamp.wall, NANOS)
    return f"{seconds}.{nanos:09d},{stamp.logical}"


def _table_name(target: str) -> str:
    """The table a target names: its last part, folded to lower case unless quoted (as SQL names are)."""
    last = target.strip().split(".")[-1]
    return last[1:-1] if last.startswith('"') else last.lower()


def _options(text: str) -> dict[str, str | None]:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    options: dict[str, str | None] = {}
    position = 0
    while position < len(text):
        match = _OPTION.match(text, position)
        if not match or match.end() == position:
            raise SqlError("42601", f"at or near {text[position : position + 20]!r}: syntax error")
        value = match[2]
        if value is not None and value.startswith("'"):
            value = value[1:-1].replace("''", "'")
        options[match[1].lower()] = value
        position = match.end()
    return options


def _hlc_option(options: dict[str, str | None], name: str) -> Hlc | None:
    value = options.get(name)
    if value is None:
        if name in options:
            raise SqlError(UNCATEGORIZED, f'option "{name}" requires a value')
        return None
    text = value
    try:
        return Hlc.parse(text if "." in text else f"{text}.0000000000")
    except ValueError:
        raise SqlError(UNCATEGORIZED, f"could not parse {text!r} as a timestamp for {name}") from None


def serve(cluster: Cluster, port: int = 0, host: str = "127.0.0.1") -> WireServer:
    """The server, started on ``host`` (``port`` 0: any free one; its ``port`` says which)."""
    return WireServer(CockroachEngine(cluster), port, host).start()


def main(argv: list[str] | None = None) -> int:
    """Serve the sink generator's history (the demo, the stack): ``python -m lakefeed_testing.crdb_server --port 26257``
    (the same seed and sizes as a sink generated with :class:`SinkSpec`'s, so its ground truth is that sink's)."""
    from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

    parser = argparse.ArgumentParser(description="A CockroachDB stand-in serving core changefeeds over SQL.")
    parser.add_argument("--port", type=int, default=26257)
    parser.add_argument("--scratch", default="/tmp/lakefeed-crdb-server-sink")
    parser.add_argument("--password", default=None)
    parser.add_argument("--steps", type=int, default=SinkSpec.steps)
    parser.add_argument("--changes-per-step", type=int, default=SinkSpec.changes_per_step)
    parser.add_argument("--host", default="127.0.0.1")
    args = parser.parse_args(argv)
    truth = generate_sink(args.scratch, SinkSpec(steps=args.steps, changes_per_step=args.changes_per_step))
    newest = max(c.stamp for c in truth.history)
    clock = [Hlc(newest.wall + 60 * NANOS, 0)]
    cluster = Cluster(
        truth.history, lambda: clock[0], password=args.password, set_clock=lambda t: clock.__setitem__(0, t)
    )
    server = serve(cluster, args.port, args.host)
    print(f"serving {len(truth.history)} changes on {args.host}:{server.port}; clock {clock[0]}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
