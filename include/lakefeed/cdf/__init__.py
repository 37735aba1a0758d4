"""Delta Lake change data feed → Delta."""

KEY = "cdf"  # the feed's kind: its monitor card and lineage jobs
DAG_ID = "delta_cdf_to_delta"
