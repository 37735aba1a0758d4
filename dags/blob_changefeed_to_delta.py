"""
### Azure Blob Storage change feed → Delta

Every hour: wait (deferred, no worker slot; a manual run does not wait, it ends
up to date at once when nothing is ready) until a window past the checkpoint
is ready in the feed (`lastConsumable >= T + 1h`), plan the ready windows in
batches, run one `spark_jobs/blob_changefeed_job.py` per batch
(pool `lakefeed_spark`), then advance the checkpoint Variable
`lakefeed_blob_checkpoint` over the contiguous prefix of finished batches.
The run summary lands in the `commit_checkpoint` XCom and log.

**Backfill** re-processes a range idempotently and never sets nor moves the
checkpoint's watermark (the next scheduled run still starts where the
checkpoint, or the feed, starts):
- *Single Run* with `window_start` and `window_end` (ISO, on the feed's
  hourly grid, end exclusive) re-processes exactly that range;
- Airflow's *Backfill* (UI, or `airflow backfill create`) makes one run per
  hourly interval; each re-processes the grid window that starts in its data
  interval.

**Reset:** `reset_checkpoint` ingests from the feed's first window again and
records the feed and targets anew: the way on when a run refuses a checkpoint
made on another feed, or a target that was dropped, recreated or restored.

**Retention:** a run stops, naming the windows that may be missing events,
when the change feed's retention deleted segments or chunk files before they
were read; `acknowledge_data_loss` goes on from what remains and records the
windows given up in the run summary.

**Adopting tables:** with an empty checkpoint a run refuses targets holding
rows this pipeline did not write; `adopt_targets` merges into them anyway.

A job that refuses its input (exit code 2: corrupt Avro, bad manifest, a shard
lost to retention) fails without retry; transient failures retry with backoff.

**Configuration:** the `lakefeed_blob_config` Variable (JSON; keys in
`include/lakefeed/blob/config.py`), defaulting to the demo feed under `data/demo`.
"""

from lakefeed.blob.spec import SPEC
from lakefeed_airflow.pipeline_dag import feed_dag

dag = feed_dag(SPEC, __doc__)
