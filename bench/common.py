"""Helpers shared by the benchmark scripts: timing, child-process peak memory, result tables."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "bench"
RESULTS = DATA / "results.json"


@contextmanager
def timed(results: dict, name: str):
    started = time.perf_counter()
    yield
    results[name] = round(time.perf_counter() - started, 3)
    print(f"  {name}: {results[name]:.1f}s", flush=True)


def child_peak_rss_mb(code: str) -> float:
    """Run ``code`` in a fresh Python and return its peak resident memory (VmHWM) in MiB.

    Not ``ru_maxrss``: on Linux a child inherits its parent's high-water mark across fork.
    """
    probe = code + ("\nprint('PEAK', next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    return int(out.split("PEAK")[-1].strip()) / 1024


def run_measured(
    cmd: Sequence[str], env: Mapping[str, str] | None = None, interval: float = 0.2
) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Run ``cmd`` to its end (output captured as text): its wall seconds, the peak of the summed resident
    memory in MiB of it and every process descending from it (spark-submit's JVM, its Python driver and
    workers), sampled from /proc every ``interval`` seconds by a thread, and the completed process."""
    started = time.perf_counter()
    process = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while True:
            peak = max(peak, _tree_rss_bytes(process.pid))
            if done.wait(interval):
                return

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stdout, stderr = process.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    return seconds, peak / 2**20, subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _tree_rss_bytes(root: int) -> int:
    """The summed resident memory of ``root`` and its descendants, from every /proc/<pid>/stat (Linux).

    A child caught between its fork (or the JVM's posix_spawn, which clones the address space) and its exec
    still has its parent's address space: /proc shows it the parent's whole resident memory (a sampled
    spark-submit once showed a child "Thread-5" holding the JVM's 3834 MiB), though it adds none. Such a
    child (the same virtual size as its parent) counts nothing; once it has exec'd, its own memory counts.
    """
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    vsize: dict[int, int] = {}
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rpartition(b")")[2].split()  # after the command name, which may hold spaces
        except OSError:  # gone since the listing
            continue
        pid = int(entry)
        parent[pid] = int(fields[1])  # field 4: ppid
        children.setdefault(parent[pid], []).append(pid)
        vsize[pid] = int(fields[20])  # field 23: virtual memory size in bytes
        rss[pid] = int(fields[21])  # field 24: resident pages
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        if pid == root or vsize.get(pid) != vsize.get(parent.get(pid, -1)):
            total += rss.get(pid, 0)
        pending.extend(children.get(pid, ()))
    return total * os.sysconf("SC_PAGE_SIZE")


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, {round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB, Python {platform.python_version()}"


def save(section: str, figures: dict) -> None:
    DATA.mkdir(parents=True, exist_ok=True)
    everything = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    everything[section] = {
        **figures,
        "measured": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": machine(),
    }
    RESULTS.write_text(json.dumps(everything, indent=2))
