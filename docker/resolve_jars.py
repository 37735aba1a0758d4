"""Resolve Delta Lake's and hadoop-azure's jars at image build time into one folder (LAKEFEED_JARS_DIR),
so a container's spark-submit, driver and executors load them without reaching Maven Central.

    python docker/resolve_jars.py /opt/lakefeed/jars

Runs before the library is installed (so a code change does not fetch the jars again): it imports
``lakefeed.spark`` from the source tree next to it, which needs only the standard library and pyspark.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "include"))

from lakefeed.spark import beyond_spark, resolve_packages, runtime_packages


def main(target: str) -> None:
    folder = Path(target)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ivy-") as ivy:
        jars = beyond_spark(resolve_packages(runtime_packages(), ivy_dir=Path(ivy)))
        for jar in jars:
            shutil.copy(jar, folder / jar.name)
    print(f"{len(jars)} jars in {folder}: {', '.join(sorted(j.name for j in jars))}")


if __name__ == "__main__":
    main(sys.argv[1])
