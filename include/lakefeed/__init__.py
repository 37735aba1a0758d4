"""lakefeed: ingest change feeds into Delta tables, exactly once.

The importable library behind the DAGs and Spark jobs. It has no Airflow
imports; Spark is imported only by the modules that need it
(``lakefeed.spark`` and the ``transforms``/``sink`` modules).
"""

__version__ = "0.1.0"
