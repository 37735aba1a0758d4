"""The benchmarks' memory figure (bench/common.py: the peak summed resident memory of a command's process tree)
counts memory a process really holds: a child forked but not yet exec'd shares its parent's pages, which
/proc shows as its own (a spark-submit once measured 8.7 GB for ~4.5 GB: the JVM counted twice while it
spawned a command)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

COMMON = Path(__file__).resolve().parents[2] / "bench" / "common.py"
HOLD = 200 << 20

# Holds HOLD bytes, then forks a child that only sleeps (no exec: it shares every page), then one that execs.
PARENT = f"""
import os, subprocess, sys, time
held = bytearray(os.urandom(1 << 20)) * {HOLD >> 20}
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
sleeper = subprocess.Popen(["sleep", "30"])
print("ready", flush=True)
time.sleep(30)
"""


def _common() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_common", COMMON)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(COMMON.parent))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(COMMON.parent))
    return module


def test_a_child_sharing_its_parents_memory_is_not_counted_twice() -> None:
    tree_rss = _common()._tree_rss_bytes
    process = subprocess.Popen([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        time.sleep(0.2)
        measured = tree_rss(process.pid)
        assert HOLD < measured < HOLD * 1.5, f"{measured >> 20} MiB for a tree holding {HOLD >> 20} MiB once"
    finally:
        subprocess.run(["pkill", "-P", str(process.pid)], check=False)
        process.kill()
        process.wait()
