"""Reproduce every benchmark figure and ratio with one command, then rewrite the table in bench/README.md.

make bench
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import RESULTS  # noqa: E402


def _mb(value: int) -> str:
    return f"{value / 1e6:.1f} MB"


def table(results: dict) -> str:
    blob, cdf, scaling = results.get("blob", {}), results.get("cdf", {}), results.get("scaling", {})
    r = blob.get("ratios", {})
    seconds = blob.get("seconds", {})
    rows = [
        ("machine", blob.get("machine", "?"), ""),
        ("measured", blob.get("measured", "?"), ""),
        (
            "feed (service-shaped: enum eventType)",
            f"{blob['feed']['chunkFiles']} chunk files, "
            f"{blob['feed']['bytes'] / 1e6:.0f} MB, {blob['records_in_files']:,} records, {blob['feed']['windows']} windows",
            "",
        ),
        ("Azure SDK ChangeFeedClient (Azurite, subset)", f"{blob['sdk_events_per_s']:,} events/s", ""),
        ("fastavro single process, local disk", f"{blob['fastavro_local_events_per_s']:,} records/s", ""),
        (
            "fastavro single process, download + decode from Azurite",
            f"{blob['fastavro_azurite_events_per_s']:,} records/s",
            "",
        ),
        (
            "our decode stage, columnar decoder (local[2])",
            f"{blob['spark_decode_events_per_s']:,} records/s",
            f"{r['decode_vs_single_fastavro']}x single fastavro",
        ),
        (
            "our decode stage, fastavro record by record (local[2])",
            f"{blob['spark_python_decoder_events_per_s']:,} records/s",
            f"{r['record_decoder_vs_single_fastavro']}x single fastavro",
        ),
        (
            "our job end to end, cold, local feed (spark-submit wall)",
            f"{seconds['e2e_cold_spark_submit']:.1f} s, {blob['e2e_cold_records_per_s']:,} records/s",
            f"{r['e2e_cold_vs_fastavro_local']}x fastavro (target 0.5x); target <= 31 s",
        ),
        (
            "our job end to end, cold, feed in Azurite",
            f"{seconds['e2e_cold_azurite_spark_submit']:.1f} s, {blob['e2e_cold_azurite_records_per_s']:,} records/s",
            f"{r['e2e_cold_azurite_vs_fastavro_azurite']}x fastavro from Azurite (target 0.5x)",
        ),
        (
            "our job end to end, warm (targets hold the previous day)",
            f"{blob['e2e_warm_events_per_s']:,} events/s",
            f"{r['e2e_warm_vs_sdk']}x SDK",
        ),
        (
            "long backfill: 24 windows in one Spark application",
            f"{blob['backfill_24_windows']['eventsUnique']:,} events, {blob['backfill_24_windows']['events_per_s']:,}"
            f" events/s, {blob['backfill_24_windows']['seconds_per_window']} s per window",
            f"{r['backfill_window_vs_single_window_run']}x the time of a one-window run per window",
        ),
        (
            "columnar decoder peak memory, ~1 MB vs ~50 MB chunk",
            f"{blob['decoder_peak_memory']['1MB']['peakMiB']} / {blob['decoder_peak_memory']['50MB']['peakMiB']} MiB",
            f"{r['decoder_memory_50MB_vs_1MB']}x for {r['chunk_size_50MB_vs_1MB']}x larger files (target 1.5x)",
        ),
        ("no new data: sensor check, no Spark", f"{blob['no_new_data_check_seconds'] * 1000:.2f} ms", ""),
    ]
    if scaling:
        b, c = scaling["blob"], scaling["cdf"]
        for label in ("small", "big"):
            w = b[label]["written"]
            rows.append(
                (
                    f"hourly blob run, {b[label]['eventsUnique']:,} events, into {label} targets "
                    f"({b['targets'][label]['events']:,} events, {b['targets'][label]['state']:,} state rows)",
                    f"{b[label]['seconds']:.1f} s",
                    f"wrote {_mb(w['bytes'])}, {w['stateFilesRewritten']} files "
                    f"rewritten, {w['stateRowsCopied']} rows copied",
                )
            )
        rows.append(("hourly blob run: big targets vs small", "", f"{b['ratio_big_vs_small']}x (target <= 1.5x)"))
        w = b["replay_big"]["written"]
        rows.append(
            (
                "blob replay of the applied window (big targets)",
                f"{b['replay_big']['seconds']:.1f} s",
                f"{w['commits']} commits, {_mb(w['bytes'])} written, {w['stateRowsCopied']} rows rewritten (target 0)",
            )
        )
        for kind, words in (("spread", "spread over all keys"), ("recent", "among the newest keys")):
            for label in ("small", "big"):
                f = c[f"{kind}_{label}"]
                w = f["written"]
                rows.append(
                    (
                        f"CDF: {f['keysChanged']:,} changed keys {words} into {f['targetRows']:,} rows",
                        f"{f['seconds']:.1f} s",
                        f"wrote {_mb(w['bytes'])}, {w['filesRewritten']} files "
                        f"rewritten, {w['rowsCopied']} rows copied",
                    )
                )
            rows.append(
                (f"CDF, keys {words}: big target vs small", "", f"{c[f'ratio_{kind}_big_vs_small']}x (target <= 1.5x)")
            )
        w = c["replay_big"]["written"]
        rows.append(
            (
                "CDF replay of the applied version (big target)",
                f"{c['replay_big']['seconds']:.1f} s",
                f"committed: {c['replay_big']['committed']}, {_mb(w['bytes'])} written, {w['rowsCopied']} rows "
                "rewritten (target 0)",
            )
        )
    if cdf:
        rows += [
            (
                "CDF: plain read + overwrite",
                f"{cdf['seconds']['plain_read_and_overwrite']} s",
                f"{cdf['changedRows']:,} changed rows, {cdf['versions']} versions",
            ),
            (
                "CDF: our apply (reduce + guarded MERGE)",
                f"{cdf['seconds']['ours_apply']} s ({cdf['ours_rows_per_s']:,} rows/s)",
                f"{cdf['ratios']['ours_vs_plain_time']}x plain",
            ),
        ]
    crdb = results.get("crdb")
    if crdb:
        rows += [
            (
                "CockroachDB: bare json.loads, single process",
                f"{crdb['json_loads_messages_per_s']:,} messages/s",
                f"{crdb['files']} files, {crdb['bytes'] / 1e6:.0f} MB, {crdb['messages']:,} messages",
            ),
            (
                "CockroachDB: single-process script (json.loads, greatest updated per key, delta-rs)",
                f"{crdb['seconds']['single_process_script']:.1f} s, {crdb['script_messages_per_s']:,} messages/s",
                "",
            ),
            (
                "CockroachDB: our job, cold (spark-submit wall)",
                f"{crdb['seconds']['job_cold_spark_submit']:.1f} s, {crdb['job_messages_per_s']:,} messages/s",
                f"{crdb['ratio_job_vs_script']}x the script (target 1x); {crdb['ratio_job_vs_json_loads']}x bare "
                f"json.loads (the floor); {crdb['keys']:,} keys merged",
            ),
        ]
    lines = ["| figure | value | ratio |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def headline(results: dict) -> str:
    """The project's performance targets against this machine's figures: the README's table."""
    blob, cdf, crdb, scaling = results["blob"], results["cdf"], results["crdb"], results["scaling"]
    hourly, spread = scaling["blob"], scaling["cdf"]
    rows = [
        (
            f"Blob change feed job, cold, {blob['records_in_files']:,} records",
            f"{blob['ratios']['e2e_cold_vs_fastavro_local']}x a bare fastavro read "
            f"({blob['seconds']['e2e_cold_spark_submit']:.1f} s)",
            ">= 0.5x",
        ),
        (
            f"CockroachDB job, cold, {crdb['messages']:,} messages",
            f"{crdb['ratio_job_vs_script']}x the single-process script "
            f"({crdb['seconds']['job_cold_spark_submit']:.1f} s against {crdb['seconds']['single_process_script']:.1f} s)",
            ">= 1x",
        ),
        (
            f"CDF bulk apply, {cdf['changedRows']:,} changed rows",
            f"{cdf['ratios']['ours_vs_plain_time']}x a plain read + overwrite",
            "<= 1.5x",
        ),
        ("CDF hourly run, keys spread, 100x larger target", f"{spread['ratio_spread_big_vs_small']}x", "<= 1.5x"),
        ("Blob hourly run, 20-100x larger targets", f"{hourly['ratio_big_vs_small']}x", "<= 1.5x"),
        (
            "Replay of applied work (blob, CDF)",
            f"{hourly['replay_big']['written']['commits']} commits, "
            f"{'1 commit' if spread['replay_big']['committed'] else '0 commits'}",
            "0",
        ),
    ]
    lines = [f"Measured {blob.get('measured', '?')} on {blob.get('machine', '?')}.", ""]
    lines += ["| run | measured | target |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def main() -> int:
    if sys.argv[1:] != ["--table-only"]:  # --table-only: rewrite the README table from saved results
        for script in ("blob_bench.py", "scaling_bench.py", "cdf_bench.py", "crdb_bench.py"):
            print(f"== {script}", flush=True)
            subprocess.run([sys.executable, str(HERE / script)], check=True)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    missing = [name for name in ("blob", "scaling", "cdf", "crdb") if name not in results]
    if missing:  # the table is rebuilt whole: a section missing would drop its rows
        print(
            f"{RESULTS} holds no figures of {', '.join(missing)}: run "
            + ", ".join(f"bench/{name}_bench.py" for name in missing)
            + " (or make bench) first; the README table is left as it is",
            file=sys.stderr,
        )
        return 2
    readme = HERE / "README.md"
    text = readme.read_text()
    text = re.sub(
        r"<!-- results -->.*<!-- /results -->",
        f"<!-- results -->\n{table(results)}\n<!-- /results -->",
        text,
        flags=re.S,
    )
    readme.write_text(text)
    project = HERE.parent / "README.md"
    project.write_text(
        re.sub(
            r"<!-- headline -->.*<!-- /headline -->",
            f"<!-- headline -->\n{headline(results)}\n<!-- /headline -->",
            project.read_text(),
            flags=re.S,
        )
    )
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
