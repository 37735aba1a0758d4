"""The yardstick of the CockroachDB job: the single-process script a user would write in an afternoon.

Every ndjson data file of a sink folder, line by line with ``json.loads``; per (topic, key) the message
with the greatest ``updated``, compared exactly as the integer pair (wall, logical); then one Delta table
per topic written with delta-rs (the ``deltalake`` package) into a fresh target: the row's columns, the
key, ``updated`` and a tombstone flag, as our job's targets hold them. No Spark, no JVM.

    python bench/crdb_reference.py SINK_ROOT TARGET_ROOT
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any


def latest_changes(sink_root: Path) -> tuple[dict[str, dict[tuple, tuple]], int]:
    """topic -> key -> (wall, logical, updated text, after); and the number of messages read."""
    latest: dict[str, dict[tuple, tuple]] = {}
    messages = 0
    for path in sorted(sink_root.rglob("*.ndjson")):
        topic = path.name.rsplit("-", 2)[-2]  # <timestamp>-<uniquer>-<topic>-<schema id>.ndjson
        per_key = latest.setdefault(topic, {})
        with path.open("rb") as handle:
            for line in handle:
                message = json.loads(line)
                messages += 1
                wall, logical = message["updated"].split(".")
                change = (int(wall), int(logical), message["updated"], message["after"])
                key = tuple(message["key"])
                held = per_key.get(key)
                if held is None or change[:2] > held[:2]:
                    per_key[key] = change
    return latest, messages


def write_tables(latest: dict[str, dict[tuple, tuple]], target_root: Path) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    shutil.rmtree(target_root, ignore_errors=True)
    for topic, per_key in latest.items():
        rows: list[dict[str, Any]] = []
        for key, (_wall, _logical, updated, after) in per_key.items():
            row = dict(after) if after is not None else {}
            row["_crdb_key"] = json.dumps(list(key), separators=(",", ":"))
            row["_crdb_updated"] = updated
            row["_crdb_deleted"] = after is None
            rows.append(row)
        columns = list(dict.fromkeys(name for row in rows for name in row))
        table = pa.table({name: [row.get(name) for row in rows] for name in columns})
        write_deltalake(str(target_root / topic), table, mode="overwrite")


def main(argv: list[str]) -> int:
    sink_root, target_root = Path(argv[0]), Path(argv[1])
    latest, messages = latest_changes(sink_root)
    write_tables(latest, target_root)
    print(json.dumps({"messages": messages, "keys": sum(len(k) for k in latest.values())}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
