"""Azure Blob Storage change feed (``$blobchangefeed``) → Delta."""

KEY = "blob"  # the feed's kind: its monitor card and lineage jobs
DAG_ID = "blob_changefeed_to_delta"
