"""Property-based fuzzing (Hypothesis) of every reader of outside input: blob chunk files (both decoders),
Segments.json and segment manifests, Delta commits, CockroachDB sink files (ndjson, gzip) and RESOLVED files.

Each case mutates a real file — truncation anywhere, byte flips, a deleted or duplicated span (Avro blocks
included), random bytes spliced in, deeply nested JSON — and the reader must end in one of two ways: a
refusal of the reader's own error type whose message names the file, or a successful read whose content is
consistent with the original (a prefix for a truncation, the same ids for a duplicated block, the same
records from both blob decoders). Never another exception (a traceback, an exit 1 for a bad file) and never
a hang (Hypothesis' deadline). The job-level promise — refused with exit 2 and nothing written — builds on
these readers and is tested through the jobs' bad-input corpora.

Budget: ``LAKEFEED_FUZZ_EXAMPLES`` cases per reader (default 60, fixed seed); a longer run:

    LAKEFEED_FUZZ_EXAMPLES=2000 python -m pytest tests/integration/test_fuzz_readers.py -p no:xdist -s

The outcome table is printed at the end and written to ``data/fuzz/outcomes.json``.
"""

from __future__ import annotations

import collections
import gzip
import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from lakefeed_testing.blob_generator import FeedSpec, generate_feed
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

from lakefeed.blob.avro_container import block_groups, read_header
from lakefeed.blob.decode import ChunkRef, decode_chunk
from lakefeed.blob.feed import parse_last_consumable, parse_manifest
from lakefeed.crdb.messages import ndjson_messages
from lakefeed.crdb.sink import DATA, RESOLVED, list_sink, resolved_value
from lakefeed.deltalog import DeltaLog
from lakefeed.errors import ChangeDataError, FeedCorruptError, FeedError
from lakefeed.storage import Store

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("LAKEFEED_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES, deadline=30_000, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
OUTCOMES: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)


@pytest.fixture(scope="module", autouse=True)
def outcome_table():
    yield
    table = {reader: dict(counts) for reader, counts in sorted(OUTCOMES.items())}
    folder = ROOT / "data" / "fuzz"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "outcomes.json").write_text(json.dumps(table, indent=2))
    print("\nfuzz outcomes (cases per reader and outcome):")
    for reader, counts in table.items():
        print(f"  {reader:<28} {sum(counts.values()):>5}  " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


# -- mutations ----------------------------------------------------------------------------------------------


@st.composite
def mutations(draw, data: bytes, spans: list[tuple[int, int]] = ()):
    """A mutated copy of ``data`` and the kind of mutation (``spans``: Avro blocks, to delete or repeat)."""
    kinds = ["truncate", "flip", "delete", "duplicate", "splice"] + (["drop block", "repeat block"] if spans else [])
    kind = draw(st.sampled_from(kinds))
    n = len(data)
    if kind == "truncate":
        return kind, data[: draw(st.integers(0, n - 1))]
    if kind == "flip":
        at = draw(st.integers(0, n - 1))
        return kind, data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1 :]
    if kind in ("drop block", "repeat block"):
        start, end = draw(st.sampled_from(spans))
        return kind, data[:end] + data[start:] if kind == "repeat block" else data[:start] + data[end:]
    start = draw(st.integers(0, n - 1))
    end = draw(st.integers(start, min(n, start + 256)))
    if kind == "delete":
        return kind, data[:start] + data[end:]
    if kind == "duplicate":
        return kind, data[:end] + data[start:end] + data[end:]
    return kind, data[:start] + draw(st.binary(min_size=1, max_size=64)) + data[end:]


def _json_mutations(document: object) -> st.SearchStrategy:
    """Wrong types and huge or deeply nested values in place of a JSON document's fields, as text."""
    if not isinstance(document, dict):
        return st.just(("wrong type", json.dumps([document])))
    keys = st.sampled_from(sorted(document))
    values = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False),
        st.text(max_size=20),
        st.lists(st.integers(), max_size=3),
        st.just("x" * 1_000_000),
    )
    nested = st.integers(10, 100_000).map(lambda depth: "[" * depth + "]" * depth)

    def typed(key_value):
        key, value = key_value
        return "wrong type", json.dumps({**document, key: value})

    def deep(key_depth):
        key, text = key_depth
        return "deeply nested", json.dumps({k: v for k, v in document.items() if k != key})[
            :-1
        ] + f', "{key}": {text}}}'

    return st.one_of(st.tuples(keys, values).map(typed), st.tuples(keys, nested).map(deep))


def _outcome(reader: str, kind: str, refused: bool) -> None:
    OUTCOMES[reader][f"{kind}: {'refused' if refused else 'read'}"] += 1


# -- blob chunk files -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["null", "deflate"])
def chunk(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"feed-{request.param}")
    generate_feed(
        root, FeedSpec(hours=1, events_per_hour=300, shards=1, records_per_chunk=300, seed=5, codec=request.param)
    )
    path = max(root.rglob("*.avro"), key=lambda p: p.stat().st_size)
    data = path.read_bytes()
    relative = path.relative_to(root).as_posix()
    with path.open("rb") as handle:
        header, stream = read_header(handle, str(path))
        spans, offset = [], len(header.raw)
        for group in block_groups(header, stream, target_bytes=1):  # one block a group
            size = len(group.data) - len(header.raw)
            spans.append((offset, offset + size))
            offset += size
    records = _decode(root, relative, True)
    return request.param, root, relative, data, spans, records


def _decode(root: Path, relative: str, columnar: bool):
    ref = ChunkRef(str(root), relative, "00", datetime(2026, 1, 1, tzinfo=UTC), columnar=columnar)
    return [r for batch in decode_chunk(Store(str(root)), ref) for r in batch.to_pylist()]


def test_chunk_files(chunk, tmp_path_factory):
    codec, _root, relative, original, spans, records = chunk
    work = tmp_path_factory.mktemp("chunk-cases")
    target = work / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    ids = [r["id"] for r in records]

    @FUZZ
    @seed(1)
    @given(mutations(original, spans))
    def case(mutation):
        kind, data = mutation
        target.write_bytes(data)
        results = []
        for columnar in (True, False):
            try:
                results.append(_decode(work, relative, columnar))
            except FeedCorruptError as exc:
                assert relative in str(exc), exc
                results.append(None)
        refused = results[0] is None or results[1] is None
        _outcome(f"chunk file ({codec})", kind, refused)
        if results[0] is not None and results[1] is not None:
            assert results[0] == results[1], "the two decoders read the same file differently"
        read = next((r for r in results if r is not None), None)
        if read is not None and kind in ("truncate", "drop block"):
            got = [r["id"] for r in read]
            assert set(got) <= set(ids)
        if read is not None and kind == "repeat block":
            assert {r["id"] for r in read} == set(ids)

    case()


# -- Segments.json and manifests ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def feed(tmp_path_factory):
    root = tmp_path_factory.mktemp("feed-meta")
    generate_feed(root, FeedSpec(hours=2, events_per_hour=50, shards=2, records_per_chunk=50, seed=9))
    return root


def test_segments_json_and_manifests(feed, tmp_path_factory):
    manifest = next(feed.rglob("meta.json")).relative_to(feed).as_posix()
    documents = {
        "meta/Segments.json": json.loads((feed / "meta" / "Segments.json").read_text()),
        manifest: json.loads((feed / manifest).read_text()),
    }
    start = datetime.strptime("/".join(manifest.split("/")[2:6]), "%Y/%m/%d/%H%M").replace(tzinfo=UTC)
    work = tmp_path_factory.mktemp("meta-cases")

    def read(relative: str) -> None:
        store = Store(str(work))
        if relative == "meta/Segments.json":
            parse_last_consumable(store.read_json(relative), store.url(relative))
        else:
            parse_manifest(store.read_json(relative), store.url(relative), start)

    strategies = st.one_of(
        *[
            st.tuples(
                st.just(relative),
                st.one_of(
                    mutations(json.dumps(document).encode()),
                    _json_mutations(document).map(lambda m: (m[0], m[1].encode())),
                ),
            )
            for relative, document in documents.items()
        ]
    )

    @FUZZ
    @seed(2)
    @given(strategies)
    def case(named):
        relative, (kind, data) = named
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        try:
            read(relative)
            refused = False
        except FeedError as exc:
            assert relative.rsplit("/", 1)[-1] in str(exc), exc
            refused = True
        _outcome("Segments.json" if relative.startswith("meta/") else "segment manifest", kind, refused)

    case()


# -- Delta commits --------------------------------------------------------------------------------------------


def test_delta_commits(tmp_path_factory):
    import pyarrow as pa
    from deltalake import write_deltalake

    table = tmp_path_factory.mktemp("delta")
    write_deltalake(str(table), pa.table({"id": [1, 2, 3]}), configuration={"delta.enableChangeDataFeed": "true"})
    commit = table / "_delta_log" / f"{0:020d}.json"
    original = commit.read_bytes()
    first = json.loads(original.splitlines()[0])

    @FUZZ
    @seed(3)
    @given(st.one_of(mutations(original), _json_mutations(first).map(lambda m: (m[0], m[1].encode()))))
    def case(mutation):
        kind, data = mutation
        commit.write_bytes(data)
        try:
            actions = DeltaLog(Store(str(table))).actions(0)
            assert isinstance(actions, list)
            refused = False
        except ChangeDataError as exc:
            assert commit.name in str(exc), exc
            refused = True
        _outcome("Delta commit", kind, refused)

    case()


# -- CockroachDB sink files -----------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=[None, "gzip"])
def sink(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"sink-{request.param}")
    generate_sink(
        root,
        SinkSpec(
            steps=6,
            changes_per_step=10,
            customers=10,
            orders=10,
            compression=request.param,
            restart_at_flush=None,
            schema_change_at_step=None,
            late_file_at_resolved=None,
        ),
    )
    files = list_sink(Store(str(root)))
    data = max((f for f in files if f.kind == DATA), key=lambda f: f.size)
    resolved = next(f for f in files if f.kind == RESOLVED)
    return request.param, root, data, resolved


def test_sink_data_files(sink):
    compression, root, file, _ = sink
    path = root / file.key
    original = path.read_bytes()
    text = gzip.decompress(original) if compression else original
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    try:

        @FUZZ
        @seed(4)
        @given(
            st.one_of(
                mutations(original),
                _json_mutations(lines[0]).map(
                    lambda m: (
                        m[0],
                        gzip.compress(m[1].encode() + b"\n" + text) if compression else m[1].encode() + b"\n" + text,
                    )
                ),
            )
        )
        def case(mutation):
            kind, data = mutation
            path.write_bytes(data)
            try:
                list(ndjson_messages(Store(str(root)), file.key, file.topic, file.schema_id, file.compression))
                refused = False
            except FeedCorruptError as exc:
                assert file.key.rsplit("/", 1)[-1] in str(exc), exc
                refused = True
            _outcome(f"sink ndjson ({compression or 'plain'})", kind, refused)

        case()
    finally:
        path.write_bytes(original)


def test_resolved_files(sink):
    compression, root, _, file = sink
    if compression:
        pytest.skip("RESOLVED files are never compressed: one run is enough")
    path = root / file.key
    original = path.read_bytes()
    try:

        @FUZZ
        @seed(5)
        @given(
            st.one_of(mutations(original), _json_mutations(json.loads(original)).map(lambda m: (m[0], m[1].encode())))
        )
        def case(mutation):
            kind, data = mutation
            path.write_bytes(data)
            try:
                assert resolved_value(Store(str(root)), file) == file.timestamp
                refused = False
            except FeedCorruptError as exc:
                assert file.key.rsplit("/", 1)[-1] in str(exc), exc
                refused = True
            _outcome("RESOLVED file", kind, refused)

        case()
    finally:
        path.write_bytes(original)
