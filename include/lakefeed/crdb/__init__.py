"""CockroachDB changefeeds, from the files their cloud storage sink writes, into Delta."""

APPLIED_FILES_TABLE = "_lakefeed_applied_files"  # under the target root: the sink files applied (not a topic table)
