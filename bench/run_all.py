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
            f"{r['e2e_cold_vs_fastavro_local']}x fastavro (target 0.33x)",
        ),
        (
            "our job end to end, cold, feed in Azurite",
            f"{seconds['e2e_cold_azurite_spark_submit']:.1f} s, {blob['e2e_cold_azurite_records_per_s']:,} records/s",
            f"{r['e2e_cold_azurite_vs_fastavro_azurite']}x fastavro from Azurite (target 0.33x)",
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
                f"CDF: our apply (planner: {(cdf.get('plan') or {}).get('chosen', 'merge')})",
                f"{cdf['seconds']['ours_apply']} s ({cdf['ours_rows_per_s']:,} rows/s)",
                f"{cdf['ratios']['ours_vs_plain_time']}x plain",
            ),
        ]
    if blob.get("peak_summed_rss_mib"):
        peaks = blob["peak_summed_rss_mib"]
        rows.append(
            (
                "single-process script: fastavro, claim, Control dropped, dedupe, both tables with delta-rs",
                f"{seconds['single_process_script']:.1f} s, {blob['script_records_per_s']:,} records/s",
                f"our job cold: {r['e2e_cold_vs_single_process_script']}x its speed (target 1x); peak summed RSS "
                f"{peaks['e2e_cold_spark_submit']:.0f} MiB (ours) against {peaks['single_process_script']:.0f} MiB",
            )
        )
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
        if crdb.get("peak_summed_rss_mib"):
            peaks = crdb["peak_summed_rss_mib"]
            rows.append(
                (
                    "CockroachDB: peak summed RSS, our job against the script",
                    f"{peaks['job_cold_spark_submit']:,} MiB against {peaks['single_process_script']:,} MiB",
                    f"{crdb['ratio_rss_job_vs_script']}x (target <= 4x)",
                )
            )
    lines = ["| figure | value | ratio |", "| --- | --- | --- |"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def _speed(reference_seconds: float, ours_seconds: float) -> float:
    """How many times the reference's time ours is: above 1, ours is faster."""
    return round(reference_seconds / ours_seconds, 2)


def headline(results: dict) -> str:
    """The project's performance targets against this machine's figures: the README's table. Every figure is
    higher-is-better (a speed or memory ratio against the reference, or a count of replays that wrote nothing),
    so each is met when it is at or above its target."""
    blob, cdf, crdb, scaling = results["blob"], results["cdf"], results["crdb"], results["scaling"]
    hourly, spread = scaling["blob"], scaling["cdf"]
    blob_seconds, blob_peaks = blob["seconds"], blob.get("peak_summed_rss_mib", {})
    crdb_peaks = crdb.get("peak_summed_rss_mib", {})
    rows: list[tuple[str, float | None, float, str]] = [
        (
            f"Blob job, cold, {blob['records_in_files']:,} records: speed against a bare fastavro read",
            blob["ratios"]["e2e_cold_vs_fastavro_local"],
            0.33,
            f"{blob_seconds['e2e_cold_spark_submit']:.1f} s",
        ),
        (
            "Blob job, cold: speed against the single-process script (fastavro, claim, dedupe, delta-rs)",
            blob["ratios"].get("e2e_cold_vs_single_process_script"),
            1.0,
            f"script {blob_seconds.get('single_process_script', 0):.1f} s",
        ),
        (
            f"CockroachDB job, cold, {crdb['messages']:,} messages: speed against the single-process script",
            crdb["ratio_job_vs_script"],
            1.0,
            f"{crdb['seconds']['job_cold_spark_submit']:.1f} s against {crdb['seconds']['single_process_script']:.1f} s",
        ),
        (
            f"CDF bulk apply, {cdf['changedRows']:,} changed rows: speed against a plain read + overwrite",
            _speed(cdf["seconds"]["plain_read_and_overwrite"], cdf["seconds"]["ours_apply"]),
            0.67,
            f"plan: {(cdf.get('plan') or {}).get('chosen', 'merge')}, {cdf['seconds']['ours_apply']} s",
        ),
        (
            "CDF hourly run, keys spread: speed on a 100x larger target against a small one",
            _speed(1.0, spread["ratio_spread_big_vs_small"]),
            0.67,
            "",
        ),
        (
            "Blob hourly run: speed on 20-100x larger targets against small ones",
            _speed(1.0, hourly["ratio_big_vs_small"]),
            0.67,
            "",
        ),
        (
            "Blob job, cold: memory against the script's (its peak summed RSS over ours)",
            _speed(blob_peaks["single_process_script"], blob_peaks["e2e_cold_spark_submit"]) if blob_peaks else None,
            0.25,
            f"{blob_peaks.get('e2e_cold_spark_submit', 0):.0f} MiB against {blob_peaks.get('single_process_script', 0):.0f} MiB",
        ),
        (
            "CockroachDB job, cold: memory against the script's (its peak summed RSS over ours)",
            _speed(crdb_peaks["single_process_script"], crdb_peaks["job_cold_spark_submit"]) if crdb_peaks else None,
            0.25,
            f"{crdb_peaks.get('job_cold_spark_submit', 0):.0f} MiB against {crdb_peaks.get('single_process_script', 0):.0f} MiB",
        ),
        (
            "Replays of applied work that wrote nothing (blob, CDF), of 2",
            (hourly["replay_big"]["written"]["commits"] == 0) + (not spread["replay_big"]["committed"]),
            2,
            "",
        ),
    ]
    when = f"Measured {blob.get('measured', '?')}"
    if crdb.get("measured") and crdb.get("measured") != blob.get("measured"):  # `python bench/crdb_bench.py` alone
        when += f" (the CockroachDB rows {crdb['measured']})"
    lines = [f"{when} on {blob.get('machine', '?')}; higher is better everywhere.", ""]
    lines += ["| run | measured | target | met |", "| --- | --- | --- | --- |"]
    for name, value, target, note in rows:
        shown = "not measured" if value is None else f"{value}x" if isinstance(value, float) else str(value)
        met = "no" if value is None or value < target else "yes"
        target_shown = f">= {target}x" if isinstance(target, float) else f"{target}"
        lines.append(f"| {name} | {shown}{f' ({note})' if note else ''} | {target_shown} | {met} |")
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
