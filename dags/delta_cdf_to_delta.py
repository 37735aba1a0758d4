"""
### Delta change data feed → Delta

Every hour: wait (deferred, no worker slot; a manual run ends up to date at
once instead) until a configured source table
has versions past its pipeline's checkpoint (read from `_delta_log`, no JVM),
plan version ranges of `versions_per_job`, run one
`spark_jobs/delta_cdf_job.py` per range (pool `lakefeed_spark`), then advance
each pipeline's checkpoint Variable `lakefeed_cdf_checkpoint__<name>` over the
contiguous prefix of finished ranges. A pipeline's first run reads the change
feed from version 0 when it was on from the start, and otherwise rebuilds the
target from a snapshot.

**Backfill** re-applies versions idempotently (version-guarded) and never
creates nor moves a checkpoint:
- *Single Run* with `pipeline`, `starting_version` and `ending_version`
  re-applies exactly that range;
- Airflow's *Backfill* (UI, or `airflow backfill create`) makes one run per
  hourly interval; each re-applies, for every pipeline (or the `pipeline`
  param's), the versions its source committed within the run's data interval
  (commit timestamps, as `DESCRIBE HISTORY` shows them).

**Full refresh** (`full_refresh`, optionally `ending_version` as the snapshot
version) rebuilds the target from a snapshot and sets the checkpoint to exactly
that version, even when it was ahead (the next run applies the versions after
it again): the way on after change data was vacuumed, CDF was enabled late, or
a run refused a source or target that was recreated behind the checkpoint.

A missing source, versions cleaned from the source's log, or keys/columns
other than the checkpoint's stop the run naming them; with an empty checkpoint
a first run refuses a target holding rows it did not write unless
`adopt_targets` is set.

**Configuration:** the `lakefeed_cdf_config` Variable (JSON; keys in
`include/lakefeed/cdf/config.py`), defaulting to the demo source `data/demo/cdf/source`.
"""

from lakefeed.cdf.spec import SPEC
from lakefeed_airflow.pipeline_dag import feed_dag

dag = feed_dag(SPEC, __doc__)
