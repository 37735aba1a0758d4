"""Parsing changefeed messages as the workers do: wrapped JSON lines (plain, gzip, zstd) and parquet,
numbers kept as written, and every bad input refused naming the file and the line."""

import gzip
import io
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefeed.crdb.messages import (
    MESSAGE_SCHEMA,
    RAW_LIMIT,
    LinesQuarantined,
    ndjson_messages,
    parquet_messages,
    parse_line,
)
from lakefeed.errors import FeedCorruptError, UnreadableLine
from lakefeed.storage import Store

LINES = [
    '{"after": {"id": 1, "total": 10.50, "big": 123456789012345678901234567890, "meta": {"a": [1, 2.50]}, '
    '"ok": true, "name": "x", "gone": null}, "before": null, "key": [1, "eu"], "updated": "1741946431734000000.0000000000"}',
    '{"after": null, "key": [2, "us"], "updated": "1741946433001000000.0000000001"}',
]


def rows(batches):
    return pa.Table.from_batches(list(batches), schema=MESSAGE_SCHEMA).to_pylist()


def write(tmp_path, name, data: bytes):
    (tmp_path / name).write_bytes(data)
    return Store(str(tmp_path)), name


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_wrapped_lines_become_message_rows_with_numbers_as_written(tmp_path, compression):
    raw = ("\n".join(LINES) + "\n").encode()
    data = {None: raw, "gzip": gzip.compress(raw), "zstd": zstandard.ZstdCompressor().compress(raw)}[compression]
    store, key = write(tmp_path, "f.ndjson", data)
    upsert, delete = rows(ndjson_messages(store, key, "orders", 2, compression))
    assert (upsert["key"], upsert["wall"], upsert["logical"], upsert["deleted"]) == (
        '[1,"eu"]',
        1741946431734000000,
        0,
        False,
    )
    values, kinds = dict(upsert["values"]), dict(upsert["kinds"])
    assert values["total"] == "10.50" and kinds["total"] == "f"
    assert values["big"] == "123456789012345678901234567890" and kinds["big"] == "I"  # too long for a bigint
    assert values["meta"] == '{"a":[1,2.50]}' and kinds["meta"] == "j"
    assert (values["ok"], values["name"], values["gone"]) == ("true", "x", None) and "gone" not in kinds
    assert delete["deleted"] and delete["values"] is None and delete["updated"] == "1741946433001000000.0000000001"
    assert (upsert["topic"], upsert["schemaId"], upsert["file"], upsert["line"], delete["line"]) == (
        "orders",
        2,
        key,
        1,
        2,
    )


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"after": {"id": 1}, "key": [1], "updated": "17419464317', "malformed JSON"),
        (
            '{"after": {"id": 1}, "key": [1]}',
            "a message without updated: the changefeed was created without the updated option.*WITH updated, resolved",
        ),
        ('{"after": {"id": 1}, "updated": "1741946431734000000.0000000000"}', "a message without key"),
        ('{"key": [1], "updated": "1741946431734000000.0000000000"}', "a message without after"),
        ('{"id": 1, "__crdb__": {"updated": "1.0000000000"}}', "a message of envelope=bare"),
        ('{"after": {"id": 1}, "op": "c", "ts_ns": 1, "key": [1], "updated": "1.0000000000"}', "envelope=enriched"),
        ('{"after": {"id": 1}, "key": 1, "updated": "1741946431734000000.0000000000"}', "key must be a JSON array"),
        ('{"after": {"id": 1}, "key": [1], "updated": 17.5}', "updated must be a string"),
        ("[1, 2]", "must be a JSON object"),
        ('{"after": null, "key": [0], "updated": "99999999999999999999.0000000000"}', "past any HLC time"),
    ],
)
def test_bad_lines_are_refused_naming_file_and_line(tmp_path, line, message):
    store, key = write(tmp_path, "f.ndjson", (LINES[0] + "\n" + line + "\n").encode())
    with pytest.raises(FeedCorruptError, match=f"f.ndjson: line 2: .*{message}"):
        rows(ndjson_messages(store, key, "t", 1, None))


@pytest.mark.parametrize(
    "line, message",
    [
        ('{"after": {"id": 1}, "key": [1], "updated": "17419464317', "malformed JSON"),
        ('{"after": {"id": 1}, "updated": "1741946431734000000.0000000000"}', "a message without key"),
        ('{"key": [1], "updated": "1741946431734000000.0000000000"}', "a message without after"),
        ('{"after": {"id": 1}, "key": 1, "updated": "1741946431734000000.0000000000"}', "key must be a JSON array"),
        ('{"after": {"id": 1}, "key": [1], "updated": 17.5}', "updated must be a string"),
        ("[1, 2]", "must be a JSON object"),
        ('{"after": null, "key": [0], "updated": "99999999999999999999.0000000000"}', "past any HLC time"),
        ('{"after": 5, "key": [1], "updated": "1741946431734000000.0000000000"}', "after must be an object"),
        ('{"after": null, "key": [1], "updated": "yesterday"}', "yesterday"),
    ],
)
def test_unreadable_lines_are_set_aside_with_their_reason_and_the_rest_is_read(tmp_path, line, message):
    store, key = write(tmp_path, "f.ndjson", (LINES[0] + "\n" + line + "\n" + LINES[1] + "\n").encode())
    quarantine: dict = {}
    got = rows(ndjson_messages(store, key, "t", 1, None, quarantine))
    assert [r["line"] for r in got] == [1, 3]
    [((url, number), (topic, raw, reason))] = quarantine.items()
    assert (url, number, topic, raw) == (store.url(key), 2, "t", line)
    assert message in reason and not reason.startswith(url)
    with pytest.raises(UnreadableLine, match=f"f.ndjson: line 2: .*{message}"):
        rows(ndjson_messages(store, key, "t", 1, None))


@pytest.mark.parametrize(
    "line",
    [
        '{"after": {"id": 1}, "key": [1]}',  # no updated: the feed was created without it
        '{"id": 1, "__crdb__": {"updated": "1.0000000000"}}',
        '{"after": {"id": 1}, "op": "c", "ts_ns": 1, "key": [1], "updated": "1.0000000000"}',
    ],
)
def test_a_misconfigured_changefeed_is_refused_even_with_a_quarantine(tmp_path, line):
    store, key = write(tmp_path, "f.ndjson", (LINES[0] + "\n" + line + "\n").encode())
    with pytest.raises(FeedCorruptError) as refused:
        rows(ndjson_messages(store, key, "t", 1, None, {}))
    assert not isinstance(refused.value, UnreadableLine)


def test_a_quarantined_line_keeps_its_first_mebibyte_and_bytes_that_are_not_utf8_are_replaced(tmp_path):
    huge = b'{"after": ' + b"[" * 10 + b"x" * (RAW_LIMIT + 10)
    store, key = write(tmp_path, "f.ndjson", huge + b"\n\xff\xfe{}\n")
    quarantine: dict = {}
    assert rows(ndjson_messages(store, key, "t", 1, None, quarantine)) == []
    (_, first_raw, first_reason), (_, second_raw, _) = (quarantine[(store.url(key), n)] for n in (1, 2))
    assert len(first_raw) == RAW_LIMIT and f"the first {RAW_LIMIT} of {len(huge)} characters" in first_reason
    assert second_raw == "\ufffd\ufffd{}"


def test_lines_quarantined_by_a_task_run_twice_count_once():
    gathered = LinesQuarantined()
    total = gathered.zero({})
    for _ in range(2):
        total = gathered.addInPlace(total, {("f", 2): ("t", "x", "why")})
    assert total == {("f", 2): ("t", "x", "why")}


def test_a_truncated_gzip_file_is_refused(tmp_path):
    data = gzip.compress(("\n".join(LINES * 50) + "\n").encode())
    store, key = write(tmp_path, "f.ndjson.gz", data[: len(data) // 2])
    with pytest.raises(FeedCorruptError, match="f.ndjson.gz: corrupt or truncated gzip"):
        rows(ndjson_messages(store, key, "t", 1, "gzip"))


def test_parquet_files_give_the_same_rows_with_their_key_columns(tmp_path):
    table = pa.table(
        {
            "id": [1, 2],
            "region": ["eu", "us"],
            "total": [10.5, None],
            "meta": ['{"a":1}', None],
            "__crdb__event_type": ["c", "d"],
            "__crdb__updated": ["1741946431734000000.0000000000", "1741946433001000000.0000000001"],
        }
    )
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    store, key = write(tmp_path, "f.parquet", buffer.getvalue())
    upsert, delete = rows(parquet_messages(store, key, "orders", 1, ["id", "region"]))
    assert upsert["key"] == '[1,"eu"]' and dict(upsert["values"])["total"] == "10.5" and not upsert["deleted"]
    assert delete["deleted"] and delete["key"] == '[2,"us"]'
    with pytest.raises(FeedCorruptError, match="give them with --parquet-keys orders=COL"):
        rows(parquet_messages(store, key, "orders", 1, []))
    without = table.drop_columns(["__crdb__updated"])
    buffer = io.BytesIO()
    pq.write_table(without, buffer)
    store, key = write(tmp_path, "g.parquet", buffer.getvalue())
    with pytest.raises(FeedCorruptError, match="no __crdb__updated column"):
        rows(parquet_messages(store, key, "orders", 1, ["id"]))


def test_parse_line_alone():
    message = parse_line(LINES[1], "f: line 1")
    assert message["after"] is None and message["key"] == '[2,"us"]'


def test_a_deeply_nested_line_is_named_not_a_crash():
    from lakefeed.crdb.messages import parse_line
    from lakefeed.errors import FeedCorruptError

    line = '{"after": {"id": ' + "[" * 200_000 + "]" * 200_000 + '}, "key": [1], "updated": "1.0000000000"}'
    with pytest.raises(FeedCorruptError, match=r"f.ndjson: line 3: malformed JSON \(nested too deeply\)"):
        parse_line(line, "f.ndjson: line 3")


@pytest.mark.parametrize("compression", [None, "gzip", "zstd"])
def test_the_file_is_closed_after_reading_whatever_the_compression(tmp_path, compression, monkeypatch):
    raw = ("\n".join(LINES) + "\n").encode()
    data = {None: raw, "gzip": gzip.compress(raw), "zstd": zstandard.ZstdCompressor().compress(raw)}[compression]
    store, key = write(tmp_path, "f.ndjson", data)
    opened = []
    original = Store.open

    def tracked(self, relative):
        opened.append(original(self, relative))
        return opened[-1]

    monkeypatch.setattr(Store, "open", tracked)
    assert len(rows(ndjson_messages(store, key, "orders", 2, compression))) == 2
    assert len(opened) == 1 and opened[0].closed


# -- the block decoder (msgspec) against the line-by-line parser -------------------------------------------------
NUMBER_LITERALS = st.one_of(
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["-0", "0", "1.50", "1e5", "-2.5E-3", "10.0", "0.1", "-0.0", "123456789012345678901234.5"]),
    st.builds(lambda whole, fraction: f"{whole}.{fraction}", st.integers(-1000, 1000), st.integers(0, 10**6)),
)
TEXTS = st.builds(
    lambda text, ascii_only: json.dumps(text, ensure_ascii=ascii_only),
    st.text(st.characters(codec="utf-8"), max_size=6),
    st.booleans(),
)
SCALARS = st.one_of(NUMBER_LITERALS, TEXTS, st.sampled_from(["true", "false", "null"]))


def _members(children):
    names = st.sampled_from(['"a"', '"b"', '"id"', '"a b"', '"\\u00e9"'])
    return st.one_of(
        st.lists(children, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
        st.lists(st.tuples(names, children), max_size=3).map(
            lambda pairs: "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        ),
    )


JSON_VALUES = st.recursive(SCALARS, _members, max_leaves=6)
STAMPS = st.one_of(
    st.builds(lambda wall, logical: f'"{wall}.{logical:010d}"', st.integers(0, 2**64), st.integers(0, 3)),
    st.sampled_from(['"1741946431734000000.0000000000?"', "17.5", '"1.2"', '"17419464317\\u0034"', "null"]),
)
AFTERS = st.one_of(
    st.just("null"),
    st.lists(st.tuples(st.sampled_from(["id", "total", "name", "meta", "id"]), JSON_VALUES), max_size=5).map(
        lambda pairs: "{" + ", ".join(f'"{k}": {v}' for k, v in pairs) + "}"
    ),
    JSON_VALUES,
)
KEYS = st.one_of(st.lists(SCALARS, min_size=1, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"), JSON_VALUES)
ENVELOPE_FIELDS = st.fixed_dictionaries(
    {"after": AFTERS, "key": KEYS, "updated": STAMPS},
    optional={
        "before": JSON_VALUES,
        "__crdb__": st.just("{}"),
        "op": st.just('"c"'),
        "ts_ns": st.just("1"),
        "resolved": STAMPS,
    },
)


@st.composite
def _lines(draw):
    fields = draw(ENVELOPE_FIELDS)
    names = draw(st.permutations(sorted(fields)))
    if draw(st.integers(0, 9)) == 0:  # now and then a field is missing
        names = names[1:]
    line = "{" + draw(st.sampled_from([", ", ","])).join(f'"{name}": {fields[name]}' for name in names) + "}"
    return draw(st.sampled_from([line, line, line, line, "", "  ", line + " ", line[:-1], "[1, 2]", "NaN"]))


@settings(max_examples=int(os.environ.get("LAKEFEED_FUZZ_EXAMPLES", "300")), deadline=None)
@given(lines=st.lists(_lines(), min_size=1, max_size=4), ending=st.sampled_from(["\n", ""]))
def test_the_block_decoder_gives_the_rows_of_the_line_parser_or_leaves_the_block_to_it(lines, ending):
    """Whatever the lines (numbers in every notation, escapes, nesting, duplicate names, other envelopes,
    blank and broken lines), the block decoder either gives exactly the line parser's rows or declines."""
    from lakefeed.crdb.messages import _exact_batches, _fast_batch

    block = ("\n".join(lines) + ending).encode()
    try:
        exact = rows(_exact_batches(block, 7, "u", "t", 1, "f"))
    except FeedCorruptError:
        exact = None
    fast = _fast_batch(block, 7, "t", 1, "f")
    if fast is not None:
        assert exact is not None and pa.Table.from_batches([fast]).to_pylist() == exact


def test_the_block_decoder_takes_the_sinks_own_lines(tmp_path):
    """The sink's lines (generated, and the format notes' examples) are decoded by blocks, not line by line."""
    from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

    from lakefeed.crdb.messages import _exact_batches, _fast_batch

    generate_sink(tmp_path, SinkSpec(steps=6, changes_per_step=20))
    blocks = [p.read_bytes() for p in sorted(tmp_path.rglob("*.ndjson"))] + [("\n".join(LINES) + "\n").encode()]
    for block in blocks:
        fast = _fast_batch(block, 0, "t", 1, "f")
        assert fast is not None
        assert pa.Table.from_batches([fast]).to_pylist() == rows(_exact_batches(block, 0, "u", "t", 1, "f"))


_SHAPE_ROWS = st.lists(
    st.tuples(
        st.booleans(),  # deleted
        st.dictionaries(  # column -> kind, None for a null value
            st.sampled_from(["a", "b", "c|d", "e\x1fx", "f\x1ey", "ü"]),
            st.one_of(st.none(), st.sampled_from("iIfsbj")),
            max_size=4,
        ),
    ),
    max_size=30,
)


@given(_SHAPE_ROWS, st.sampled_from(["t", "u"]))
@settings(max_examples=150, deadline=None)
def test_row_shapes_are_the_distinct_shapes_of_the_live_rows(described, topic):
    """Arrow finds the distinct shapes of a batch exactly as a row-by-row reading would: column names with
    the separators in them, nulls, deletes and empty rows included."""
    from lakefeed.crdb.messages import row_shapes

    batch = pa.RecordBatch.from_pylist(
        [
            {
                "topic": topic,
                "deleted": deleted,
                "values": None if deleted else {c: (None if k is None else "1") for c, k in columns.items()},
                "kinds": None if deleted else {c: k for c, k in columns.items() if k is not None},
            }
            for deleted, columns in described
        ],
        schema=MESSAGE_SCHEMA,
    )
    expected = {
        (topic, tuple(columns), tuple((c, k) for c, k in columns.items() if k is not None))
        for deleted, columns in described
        if not deleted
    }
    assert row_shapes(batch) == expected


# -- the read tasks' partial pick ---------------------------------------------------------------------------------
_PICK_MESSAGES = st.lists(
    st.tuples(
        st.sampled_from([b"[1]", b"[2]", b"[ 2]", b'["a"]']),  # [ 2] is [2] written loosely
        st.integers(1, 3),  # wall
        st.integers(0, 1),  # logical
        st.sampled_from([None, b'{"v": 1}', b'{"v": 2.50}']),
        st.integers(0, 3),  # file
        st.integers(1, 2),  # schema id
    ),
    max_size=40,
)


@given(_PICK_MESSAGES, st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_picks_per_task_then_among_tasks_give_the_pick_over_all_messages(described, tasks):
    """Whatever the grouping of files into tasks, each task's greatest message per key (LatestPerKey), then the
    greatest of those, is the greatest message over all: the same row, the key's messages and distinct updated
    counted exactly (a change repeated in two tasks counts once)."""
    from lakefeed.crdb.hlc import Hlc
    from lakefeed.crdb.messages import (
        CHANGE_SCHEMA,
        CHANGES_OF_KEY,
        MESSAGES_OF_KEY,
        CountsByPartition,
        LatestPerKey,
        TopicCounts,
        compact_key,
        counts_by_topic,
        final_picks,
        topic_counts,
    )

    files: dict[int, list] = {}
    for number, (key, wall, logical, after, file, schema_id) in enumerate(described, start=1):
        files.setdefault(file, []).append((key, wall, logical, number, after, schema_id))
    batches = []
    for task in range(tasks):
        latest = LatestPerKey()
        for file, messages in sorted(files.items()):
            if file % tasks == task:
                for key, wall, logical, line, after, schema_id in messages:
                    latest.add([(key, wall, logical, line, after)], "tu"[file % 2], schema_id, f"f{file}")
        batches += list(latest.batches(str))
    picked = final_picks(pa.Table.from_batches(batches, schema=CHANGE_SCHEMA))
    got = {(row["topic"], row["key"]): row for row in picked.to_pylist()}
    assert len(got) == picked.num_rows  # one row per key

    def order(row):
        return (row["wall"], row["logical"], row["schemaId"], row["file"], row["line"])

    want = {}
    for number, (key, wall, logical, after, file, schema_id) in enumerate(described, start=1):
        row = {
            "wall": wall,
            "logical": logical,
            "schemaId": schema_id,
            "file": f"f{file}",
            "line": number,
            "after": after,
        }
        held = want.setdefault(("tu"[file % 2], compact_key(key, "k")), {"pick": row, "messages": 0, "stamps": set()})
        held["messages"] += 1
        held["stamps"].add((wall, logical))
        if order(row) > order(held["pick"]):
            held["pick"] = row
    assert set(got) == set(want)
    for key, held in want.items():
        pick = got[key]
        assert {name: pick[name] for name in held["pick"]} == held["pick"]
        assert pick["deleted"] == (held["pick"]["after"] is None)
        assert (pick[MESSAGES_OF_KEY], pick[CHANGES_OF_KEY]) == (held["messages"], len(held["stamps"]))
    # The job's figures per topic (topic_counts, gathered by partition) are those of the picks.
    halves = picked.slice(0, picked.num_rows // 2), picked.slice(picked.num_rows // 2)
    partitions = CountsByPartition()
    gathered = partitions.zero({})
    for number, part in enumerate(halves):
        gathered = partitions.addInPlace(gathered, {number: topic_counts(part)})
    gathered = partitions.addInPlace(gathered, {1: topic_counts(halves[1])})  # a partition computed again
    for topic, figures in counts_by_topic(gathered).items():
        held = [h for (t, _), h in want.items() if t == topic]
        assert figures == TopicCounts(
            sum(h["messages"] for h in held),
            sum(len(h["stamps"]) for h in held),
            len(held),
            sum(h["pick"]["after"] is not None for h in held),
            max(Hlc(h["pick"]["wall"], h["pick"]["logical"]) for h in held),
        )
    assert set(counts_by_topic(gathered)) == {topic for topic, _ in want}


@pytest.mark.parametrize(
    "line",
    [
        b'{"after": null, "key": ["\xf5x"], "updated": "1.0000000000"}',
        b'{"after": {"name": "\xe3("}, "key": [1], "updated": "1.0000000000"}',
        b'{"after": {"na\xe3(me": 1}, "key": [1], "updated": "1.0000000000"}',
    ],
)
def test_bytes_that_are_not_utf8_are_refused_naming_the_line(tmp_path, line):
    """msgspec keeps a key or a value as raw bytes without checking UTF-8: the line is still refused by name."""
    store, key = write(tmp_path, "f.ndjson", LINES[1].encode() + b"\n" + line + b"\n")
    with pytest.raises(FeedCorruptError, match=r"f.ndjson: line 2: malformed JSON"):
        rows(ndjson_messages(store, key, "t", 1, None))


@pytest.mark.parametrize("quarantined", [False, True])
@pytest.mark.parametrize(
    "bad",
    [
        b'{"after": {"name": "\xe3("}, "key": [1], "updated": "1.0000000000"}',  # superseded by line 1
        b'{"after": {"name": "\xe3("}, "key": [1], "updated": "3.0000000000"}',  # would be the pick
        b'{"after": null, "key": ["\xf5x"], "updated": "1.0000000000"}',
    ],
)
def test_the_jobs_read_refuses_or_sets_aside_bytes_that_are_not_utf8(tmp_path, bad, quarantined):
    """Through the job's own steps (a read task's picks, then the final pick): a line holding bytes that are not
    UTF-8, superseded or not, is refused naming it, or set aside when quarantine is on, never taken as read."""
    from lakefeed.crdb.messages import FILE_INPUT_SCHEMA, latest_in_task, latest_rows

    good = b'{"after": {"name": "ok"}, "key": [1], "updated": "2.0000000000"}'
    store, key = write(tmp_path, "f.ndjson", good + b"\n" + bad + b"\n")
    row = {"root": str(tmp_path), "key": key, "topic": "t", "schemaId": 1, "format": "ndjson"}
    inputs = [pa.RecordBatch.from_pylist([{**row, "compression": None, "keyColumns": ""}], schema=FILE_INPUT_SCHEMA)]

    class Gathered:
        def __init__(self):
            self.value = {}

        def add(self, lines):
            self.value = {**self.value, **lines}

    if not quarantined:
        with pytest.raises(FeedCorruptError, match=r"f.ndjson: line 2: malformed JSON"):
            list(latest_rows(latest_in_task(inputs), str(tmp_path)))
        return
    quarantine = Gathered()
    kept = pa.Table.from_batches(list(latest_rows(latest_in_task(inputs, quarantine), str(tmp_path)))).to_pylist()
    assert list(quarantine.value) == [(store.url(key), 2)]
    assert [(r["line"], dict(r["values"])) for r in kept] == [(1, {"name": "ok"})]
