"""CockroachDB changefeed: ~2M messages of a sink folder shaped like the service's (hourly folders, ndjson
files cut at 16 MiB, two topics, 200k keys, ~3 % at-least-once duplicates, a node restart) through our
job cold (spark-submit, JVM start included), against the single-process script a user would write
(``crdb_reference.py``: json.loads, the greatest ``updated`` per key, delta-rs) and a bare json.loads
loop over the same lines (the floor), measured side by side in one run.

    python bench/crdb_bench.py            # via `make bench`
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DATA, ROOT, run_measured, save, timed
from lakefeed_testing.crdb_generator import SinkSpec, generate_sink

SERVICE_SHAPED = SinkSpec(
    steps=120,
    step_seconds=60.0,  # two hours of changes: hourly folders
    changes_per_step=15_000,
    customers=50_000,
    orders=150_000,
    steps_per_flush=10,
    flushes_per_resolved=2,
    partition_format="hourly",
    file_size=16 << 20,
    seed=5,
)


def sink() -> tuple[Path, list[str]]:
    """Generate once and reuse: a marker records the spec the folder was made from."""
    folder, marker = DATA / "crdb_sink_2m", DATA / "crdb_sink_2m.json"
    wanted = json.dumps({**SERVICE_SHAPED.__dict__, "start": SERVICE_SHAPED.start.isoformat()}, sort_keys=True)
    if marker.exists() and json.loads(marker.read_text())["spec"] == wanted:
        return folder, json.loads(marker.read_text())["resolved"]
    shutil.rmtree(folder, ignore_errors=True)
    truth = generate_sink(folder, SERVICE_SHAPED)
    marker.write_text(json.dumps({"spec": wanted, "resolved": truth.resolved}))
    return folder, truth.resolved


ROUNDS = 2  # the job and the script alternate, each keeping its best: the same noise reaches both


def main() -> None:
    folder, resolved = sink()
    files = sorted(p for p in folder.rglob("*.ndjson"))
    seconds: dict = {}
    with timed(seconds, "json_loads_single_process"):
        messages = 0
        for path in files:
            with path.open("rb") as handle:
                for line in handle:
                    json.loads(line)
                    messages += 1
    reference_lake, lake = DATA / "crdb_reference_lake", DATA / "crdb_lake"
    summary_file = DATA / "crdb_summary.json"
    script = [
        sys.executable,
        str(Path(__file__).resolve().parent / "crdb_reference.py"),
        str(folder),
        str(reference_lake),
    ]
    job = [
        "spark-submit",
        str(ROOT / "spark_jobs" / "cockroach_changefeed_job.py"),
        "--sink-root",
        str(folder),
        "--target-root",
        str(lake),
        "--through-resolved",
        resolved[-1],
        "--summary-json",
        str(summary_file),
    ]
    rounds: dict[str, list[tuple[float, float]]] = {"single_process_script": [], "job_cold_spark_submit": []}
    summaries = []
    for attempt in range(1, ROUNDS + 1):
        for name, command in (("single_process_script", script), ("job_cold_spark_submit", job)):
            shutil.rmtree(lake, ignore_errors=True)  # cold: a fresh target each time
            took, peak, done = run_measured(command, env=os.environ.copy())
            if done.returncode != 0:
                raise RuntimeError(f"{name}: {(done.stdout + done.stderr)[-4000:]}")
            rounds[name].append((took, peak))
            print(f"  {name} (round {attempt}): {took:.1f}s, peak summed RSS {peak:.0f} MiB", flush=True)
            if name == "job_cold_spark_submit":
                summaries.append((took, json.loads(summary_file.read_text())))
    peaks = {}
    for name, measured in rounds.items():
        seconds[name] = round(min(took for took, _ in measured), 3)
        peaks[name] = round(max(peak for _, peak in measured))
    summary = min(summaries, key=lambda pair: pair[0])[1]
    figures = {
        "files": summary["files"],
        "bytes": summary["bytesRead"],
        "messages": summary["messagesRead"],
        "keys": sum(t["keysChanged"] for t in summary["topics"].values()),
        "json_loads_messages_per_s": round(messages / seconds["json_loads_single_process"]),
        "job_messages_per_s": round(summary["messagesRead"] / seconds["job_cold_spark_submit"]),
        "stages": summary["seconds"],
        "seconds": seconds,
        "peak_summed_rss_mib": peaks,
    }
    figures["script_messages_per_s"] = round(messages / seconds["single_process_script"])
    figures["ratio_job_vs_json_loads"] = round(figures["job_messages_per_s"] / figures["json_loads_messages_per_s"], 2)
    figures["ratio_job_vs_script"] = round(seconds["single_process_script"] / seconds["job_cold_spark_submit"], 2)
    figures["ratio_rss_job_vs_script"] = round(peaks["job_cold_spark_submit"] / peaks["single_process_script"], 2)
    save("crdb", figures)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
