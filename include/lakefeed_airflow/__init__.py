"""Airflow side of lakefeed: sensors, triggers, the checkpoint store and the DAGs' task logic."""
