"""CockroachDB changefeeds, from the files their cloud storage sink writes, into Delta."""

KEY = "cockroach"  # the feed's kind: its monitor card and lineage jobs
DAG_ID = "cockroach_changefeed_to_delta"
APPLIED_FILES_TABLE = "_lakefeed_applied_files"  # under the target root: the sink files applied (not a topic table)


def topic_tables(target_root: str, quarantine_table: str | None = None) -> list[str]:
    """The topic tables under ``target_root`` as ``<target_root>/<topic>`` (not the applied-files table, nor
    a quarantine table kept there)."""
    from lakefeed.delta import table_location
    from lakefeed.targets import tables_under

    root = target_root.rstrip("/")
    # Compared as locations: "lake" and "lake/_quarantine", or an absolute and a relative spelling, meet.
    quarantine = table_location(quarantine_table).rstrip("/") if quarantine_table else None
    return [
        f"{root}/{name}"
        for name in sorted(t.rsplit("/", 1)[1] for t in tables_under(target_root))
        if name != APPLIED_FILES_TABLE and f"{table_location(root).rstrip('/')}/{name}" != quarantine
    ]
