"""Helpers shared by the benchmark scripts: timing, child-process peak memory, result tables."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
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


def machine() -> str:
    import os

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
