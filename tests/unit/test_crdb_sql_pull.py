"""Pulling CockroachDB changefeed ranges over SQL (lakefeed.crdbsql.pull) through the real client library
(psycopg) against the wire-protocol test server (lakefeed_testing.crdb_server), on the sink generator's
history: the staged files read back as a sink, holding exactly the range's changes."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink
from lakefeed_testing.crdb_server import Cluster, Faults, serve

from lakefeed.crdb.hlc import NANOS, Hlc
from lakefeed.crdb.sink import DATA, RESOLVED, list_sink
from lakefeed.crdbsql.pull import (
    CREATE,
    EXPERIMENTAL,
    PullIncompleteError,
    Staging,
    changefeed_statement,
    next_of,
    prev_of,
    pull,
    statement_form,
)
from lakefeed.errors import ConfigError, DataLossError, FeedConfigError
from lakefeed.sql import SqlEndpoint
from lakefeed.storage import Store

SPEC = SinkSpec(steps=9, changes_per_step=30, customers=20, orders=30, restart_at_flush=None)
PASSWORD = "not-in-any-message"


@pytest.fixture(scope="module")
def truth(tmp_path_factory):
    return generate_sink(tmp_path_factory.mktemp("sink"), SPEC)


@pytest.fixture
def cluster(truth):
    newest = max(c.stamp for c in truth.history)
    found = Cluster(truth.history, lambda: Hlc(newest.wall + 60 * NANOS, 0), password=PASSWORD, resolved_every=7)
    server = serve(found)
    found.server = server
    found.endpoint = SqlEndpoint("127.0.0.1", server.port, "root", "defaultdb", PASSWORD, {"sslmode": "disable"})
    yield found
    server.stop()


def stamps(truth) -> list[Hlc]:
    return sorted({c.stamp for c in truth.history})


def staged_messages(root: Path) -> list[dict]:
    store = Store(str(root))
    found = []
    for file in list_sink(store):
        if file.kind == DATA:
            found += [json.loads(line) | {"topic": file.topic} for line in store.read_bytes(file.key).splitlines()]
    return found


def test_the_statement_names_the_range_and_the_options_the_apply_needs():
    after, through = Hlc(100, 0), Hlc(200, 5)
    assert changefeed_statement(CREATE, ["orders", "db.public.customers"], after, through, "5s") == (
        "CREATE CHANGEFEED FOR orders, db.public.customers WITH updated, resolved, format = 'json', "
        "envelope = 'wrapped', cursor = '100.0000000000', end_time = '200.0000000006', "
        "min_checkpoint_frequency = '5s'"
    )
    # initial_scan_only refuses updated and resolved: a scan bounded by end_time instead
    assert changefeed_statement(EXPERIMENTAL, ["orders"], None, through) == (
        "EXPERIMENTAL CHANGEFEED FOR orders WITH updated, resolved, format = 'json', envelope = 'wrapped', "
        "cursor = '200.0000000005', initial_scan, end_time = '200.0000000006'"
    )
    with pytest.raises(ConfigError, match="is not a duration"):
        changefeed_statement(CREATE, ["orders"], after, through, "5s'; DROP TABLE x; --")
    # end_time is exclusive and the last resolved row is end_time.Prev(): through and next_of meet exactly
    assert prev_of(next_of(through)) == through and prev_of(Hlc(7, 0)) == Hlc(6, 2147483647)
    assert next_of(Hlc(6, 2147483647)) == Hlc(7, 0)


def test_the_form_follows_the_servers_version_unless_configured():
    assert statement_form("auto", "CockroachDB CCL v24.1.4 (x86_64-pc-linux-gnu, …)") == EXPERIMENTAL
    assert statement_form("auto", "CockroachDB CCL v25.2.0 (…)") == CREATE
    assert statement_form("auto", "") == EXPERIMENTAL
    assert statement_form(CREATE, "CockroachDB CCL v23.1.0") == CREATE


def test_a_bounded_range_is_staged_as_sink_files_holding_exactly_its_changes(cluster, truth, tmp_path):
    all_stamps = stamps(truth)
    after, through = all_stamps[3], all_stamps[-5]
    pulled = pull(cluster.endpoint, ["customers", "orders"], Staging(Store(str(tmp_path)), "cp", after, through))
    files = list_sink(Store(str(tmp_path)))
    assert [f.timestamp for f in files if f.kind == RESOLVED] == [after, through]  # written last
    assert all(f.timestamp == next_of(after) for f in files if f.kind == DATA)
    staged = staged_messages(tmp_path)
    expected = {(c.topic, c.key, str(c.stamp)) for c in truth.history if after < c.stamp <= through}
    assert {(m["topic"], json.dumps(m["key"], separators=(",", ":")), m["updated"]) for m in staged} == expected
    assert pulled.messages == len(staged) and pulled.resolved_rows > 1 and pulled.statement_form == EXPERIMENTAL
    session = cluster_statements(cluster)[-1]
    assert f"cursor = '{after}'" in session and f"end_time = '{next_of(through)}'" in session


def cluster_statements(cluster) -> list[str]:
    return [statement for session in cluster.server.sessions for statement in session.statements]


def test_the_initial_scan_is_the_tables_at_its_time_after_a_resolved_file_of_its_own(cluster, truth, tmp_path):
    scan_at = stamps(truth)[len(stamps(truth)) // 2]
    (tmp_path / "2020-01-01").mkdir()  # something staged before: the scan's range does not reach it
    pull(cluster.endpoint, ["customers", "orders"], Staging(Store(str(tmp_path)), "cp", None, scan_at))
    files = list_sink(Store(str(tmp_path)))
    assert [f.timestamp for f in files if f.kind == RESOLVED] == [prev_of(scan_at), scan_at]
    state = truth.as_of(scan_at)
    live = {(t, k) for t, rows in state.items() for k, row in rows.items() if row is not None}
    staged = staged_messages(tmp_path)
    assert {(m["topic"], json.dumps(m["key"], separators=(",", ":"))) for m in staged} == live
    assert {m["updated"] for m in staged} == {str(scan_at)}


def test_a_pull_killed_mid_stream_stages_nothing_whole_and_its_retry_replaces_what_it_left(cluster, truth, tmp_path):
    all_stamps = stamps(truth)
    after, through = all_stamps[2], all_stamps[-2]
    cluster.faults = Faults(drop_after_rows=150)
    staging = Staging(Store(str(tmp_path)), "cp", after, through, file_size=2000)  # several files a topic
    with pytest.raises(PullIncompleteError, match="the connection failed while the changefeed"):
        pull(cluster.endpoint, ["customers", "orders"], staging)
    left = list_sink(Store(str(tmp_path)))
    assert left and not [f for f in left if f.kind == RESOLVED]  # files of the killed try, never whole
    retried = pull(cluster.endpoint, ["customers", "orders"], Staging(Store(str(tmp_path)), "cp", after, through))
    assert retried.removed == len(left)
    staged = staged_messages(tmp_path)
    expected = {(c.topic, c.key, str(c.stamp)) for c in truth.history if after < c.stamp <= through}
    assert {(m["topic"], json.dumps(m["key"], separators=(",", ":")), m["updated"]) for m in staged} == expected


def test_repeats_inside_the_stream_are_staged_as_they_come(cluster, truth, tmp_path):
    all_stamps = stamps(truth)
    cluster.faults = Faults(retry_after_rows=40, duplicate_every=9)
    pulled = pull(cluster.endpoint, ["orders"], Staging(Store(str(tmp_path)), "cp", all_stamps[1], all_stamps[-1]))
    expected = [c for c in truth.history if c.topic == "orders" and all_stamps[1] < c.stamp <= all_stamps[-1]]
    assert pulled.messages > len(expected)  # the updated guard absorbs them when the range is applied


def test_a_cursor_past_the_gc_threshold_is_refused_naming_the_tables_and_the_gap(cluster, truth, tmp_path):
    all_stamps = stamps(truth)
    cluster.gc_threshold = all_stamps[10]
    with pytest.raises(DataLossError) as refused:
        pull(
            cluster.endpoint,
            ["customers", "orders"],
            Staging(Store(str(tmp_path)), "cp", all_stamps[4], all_stamps[-1]),
        )
    message = str(refused.value)
    assert "customers, orders" in message and str(all_stamps[4]) in message and "reset_checkpoint" in message
    assert "older than the GC threshold" in message and PASSWORD not in message


def test_a_statement_the_server_refuses_is_named_with_its_sqlstate(cluster, truth, tmp_path):
    with pytest.raises(FeedConfigError, match=r'42P01: relation "nope" does not exist'):
        pull(cluster.endpoint, ["nope"], Staging(Store(str(tmp_path)), "cp", stamps(truth)[1], stamps(truth)[-1]))


def test_the_password_comes_from_the_connection_and_a_wrong_one_is_refused_without_showing_it(cluster):
    wrong = SqlEndpoint(
        cluster.endpoint.host, cluster.endpoint.port, "root", "defaultdb", "wrong", {"sslmode": "disable"}
    )
    with pytest.raises(psycopg.OperationalError) as refused:
        wrong.connect()
    assert "password authentication failed" in str(refused.value) and "wrong" not in repr(wrong)
    assert PASSWORD not in repr(cluster.endpoint) and PASSWORD not in cluster.endpoint.identity


def test_an_airflow_connection_uri_becomes_an_endpoint():
    endpoint = SqlEndpoint.from_uri(
        "crdb", "postgres://app%40x:p%2Fw@db.example:26257/shop?sslmode=verify-full&sslrootcert=/ca.crt&other=1"
    )
    assert (endpoint.host, endpoint.port, endpoint.user, endpoint.password, endpoint.database) == (
        "db.example",
        26257,
        "app@x",
        "p/w",
        "shop",
    )
    assert endpoint.options == {"sslmode": "verify-full", "sslrootcert": "/ca.crt"}
    assert endpoint.identity == "cockroach://db.example:26257/shop" and "p/w" not in repr(endpoint)


def test_the_sinkless_create_form_streams_the_same_changes(cluster, truth, tmp_path):
    all_stamps = stamps(truth)
    after, through = all_stamps[5], all_stamps[-3]
    pulled = pull(
        cluster.endpoint, ["customers", "orders"], Staging(Store(str(tmp_path)), "cp", after, through), CREATE
    )
    assert pulled.statement_form == CREATE and cluster_statements(cluster)[-1].startswith("CREATE CHANGEFEED FOR")
    expected = {(c.topic, c.key, str(c.stamp)) for c in truth.history if after < c.stamp <= through}
    staged = staged_messages(tmp_path)
    assert {(m["topic"], json.dumps(m["key"], separators=(",", ":")), m["updated"]) for m in staged} == expected


def test_a_failed_retry_of_a_range_never_removes_the_resolved_files_other_ranges_meet_at(cluster, truth, tmp_path):
    all_stamps = stamps(truth)
    a, b, c = all_stamps[2], all_stamps[len(all_stamps) // 2], all_stamps[-2]
    store = Store(str(tmp_path))
    pull(cluster.endpoint, ["customers", "orders"], Staging(store, "cp", a, b))
    cluster.gc_threshold = all_stamps[4]  # a backfill from a, now past the GC threshold, is refused
    with pytest.raises(DataLossError):
        pull(cluster.endpoint, ["customers", "orders"], Staging(store, "cp", a, c))
    assert b in [f.timestamp for f in list_sink(store) if f.kind == RESOLVED]  # (b, …] can still be applied


def test_the_gc_error_as_cockroachdb_wraps_it_is_read_in_both_timestamp_forms():
    from lakefeed.crdbsql.pull import _threshold

    assert _threshold("1700000100000000000") == Hlc(1700000100000000000, 0)
    assert _threshold("1700000100.000000123,4") == Hlc(1700000100000000123, 4)
    assert _threshold("1700000100000000000.0000000002") == Hlc(1700000100000000000, 2)
    assert _threshold("not-a-time") is None


def test_the_initial_scan_alone_refuses_updated_and_resolved_as_cockroachdb_does(cluster, truth):
    statement = "EXPERIMENTAL CHANGEFEED FOR orders WITH updated, initial_scan_only"
    with psycopg.connect(**cluster_parameters(cluster)) as db, pytest.raises(psycopg.Error) as refused:
        list(db.cursor().stream(statement))
    assert "cannot specify both initial_scan_only and updated" in str(refused.value)


def cluster_parameters(cluster) -> dict:
    endpoint = cluster.endpoint
    return {
        "host": endpoint.host,
        "port": endpoint.port,
        "user": endpoint.user,
        "password": endpoint.password,
        "dbname": endpoint.database,
        "sslmode": "disable",
        "autocommit": True,
    }


def test_an_internal_error_is_retried_and_a_statement_error_is_refused(cluster, truth, tmp_path):
    from lakefeed.crdbsql.pull import _refusal

    class Failure(Exception):
        def __init__(self, code):
            super().__init__("boom")
            self.sqlstate = code

    staging = Staging(Store(str(tmp_path)), "cp", stamps(truth)[1], stamps(truth)[-1])
    assert isinstance(_refusal(Failure("XXUUU"), cluster.endpoint, ["t"], staging), PullIncompleteError)
    assert isinstance(_refusal(Failure("42601"), cluster.endpoint, ["t"], staging), FeedConfigError)
