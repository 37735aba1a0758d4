"""
### CockroachDB changefeed → Delta

Every hour: wait (deferred, no worker slot; a manual run ends up to date at once instead) until the
changefeed's cloud storage sink has a RESOLVED file newer than the checkpoint (listing the sink from the
checkpoint's partition on, no JVM), plan the resolved ranges after it, `resolved_per_batch` RESOLVED files
to a `spark_jobs/cockroach_changefeed_job.py` run (pool `lakefeed_spark`), then advance the checkpoint Variable `lakefeed_crdb_checkpoint` to the last
RESOLVED timestamp of the contiguous prefix of finished batches. One Delta table per topic; the greatest
`updated` per key wins, deletes stay as tombstones. The run summary lands in the `commit_checkpoint` XCom.

**Backfill** re-applies a range idempotently and never sets nor moves the checkpoint's RESOLVED:
- *Single Run* with `after_resolved` (optional) and `through_resolved`: exactly those files;
- Airflow's *Backfill*: each hourly run re-applies the resolved ranges of its data interval.

**Reset:** `reset_checkpoint` applies the sink again from its first file and records the sink and
tables anew: the way on when a run refuses a checkpoint of another sink or a replaced topic table.

A `target_root` other than the checkpoint's stops the run naming both (reset to
apply the sink into the new folder); with an empty checkpoint, topic tables that
hold rows this pipeline did not write are refused unless `adopt_targets` is set.

**Configuration:** the `lakefeed_crdb_config` Variable (JSON; keys in `include/lakefeed/crdb/config.py`),
defaulting to the demo sink under `data/demo`.
"""

from lakefeed.crdb.spec import SPEC
from lakefeed_airflow.pipeline_dag import feed_dag

dag = feed_dag(SPEC, __doc__)
