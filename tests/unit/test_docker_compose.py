"""docker-compose.yaml cannot be started here (no Docker engine), so it is checked as data:
services, images, ports, mounts, health checks, and that its environment says what the code reads."""

import json
import re
from pathlib import Path

import pytest
import yaml

from lakefeed.config import BlobPipelineConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
SERVICES = COMPOSE["services"]
WORKERS = ["airflow-worker-1", "airflow-worker-2"]
LAKEFEED = [
    "spark-master",
    "spark-worker",
    "airflow-init",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    *WORKERS,
]


def compose_value(text: str) -> str:
    return text.replace("$$", "$")  # compose escapes a literal $ as $$


def test_services():
    assert set(SERVICES) == {"postgres", "azurite", *LAKEFEED}
    commands = {name: SERVICES[name].get("command") for name in LAKEFEED}
    assert commands["airflow-apiserver"] == ["api-server"]
    assert commands["airflow-scheduler"] == ["scheduler"]
    assert commands["airflow-dag-processor"] == ["dag-processor"]
    assert commands["airflow-triggerer"] == ["triggerer"]
    assert "deploy.master.Master" in commands["spark-master"][0]
    assert "deploy.worker.Worker spark://spark-master:7077" in commands["spark-worker"][0]
    for name in WORKERS:
        assert commands[name] == ["edge", "worker", "--concurrency", "4", "--edge-hostname", name]


def test_a_multi_worker_layout_sharing_only_the_database_and_the_storage():
    """The Edge executor with two workers that reach Airflow through the api-server only (no metadata
    database URL that works) and share no volume but the one standing for the tables' object storage."""
    for name in LAKEFEED:
        env = SERVICES[name]["environment"]
        assert env["AIRFLOW__CORE__EXECUTOR"] == "airflow.providers.edge3.executors.EdgeExecutor"
        assert env["AIRFLOW__EDGE__API_URL"] == "http://airflow-apiserver:8080/edge_worker/v1/rpcapi"
    assert SERVICES["airflow-apiserver"]["environment"]["AIRFLOW__EDGE__API_ENABLED"] == "True"
    for name in WORKERS:
        assert SERVICES[name]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("sqlite:////tmp/")
    assert "apache-airflow-providers-edge3==" in (ROOT / "requirements.txt").read_text()
    named = {
        mount.split(":")[0] for name in LAKEFEED for mount in SERVICES[name]["volumes"] if not mount.startswith("./")
    }
    assert named == {"lake"}  # the object storage of the tables; no data or run folder besides
    config = BlobPipelineConfig.from_json(
        compose_value(SERVICES["airflow-scheduler"]["environment"]["AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG"]), "compose"
    )
    assert config.events_table.startswith("/lake/") and config.state_table.startswith("/lake/")


def test_one_image_with_the_project_dependencies_for_airflow_and_spark():
    for name in LAKEFEED:
        assert SERVICES[name]["image"] == "lakefeed:local"
        assert SERVICES[name]["build"]["dockerfile"] == "docker/Dockerfile"
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "FROM apache/airflow:3.3.2-python3.11" in dockerfile
    assert "pip install --no-cache-dir -r /opt/lakefeed/requirements.txt -c /opt/lakefeed/constraints.txt" in dockerfile
    assert "openjdk-17" in dockerfile
    assert "apache-airflow==3.3.2" in (ROOT / "requirements.txt").read_text()
    assert SERVICES["postgres"]["image"].startswith("postgres:")
    assert SERVICES["azurite"]["image"].startswith("mcr.microsoft.com/azure-storage/azurite")
    assert "--skipApiVersionCheck" in SERVICES["azurite"]["command"]
    assert "--disableTelemetry" in SERVICES["azurite"]["command"]  # Azurite reports usage to Azure by default


def test_ports():
    ports = {name: service.get("ports", []) for name, service in SERVICES.items()}
    assert "8080:8080" in ports["airflow-apiserver"]
    assert "7077:7077" in ports["spark-master"]
    assert "10000:10000" in ports["azurite"]


@pytest.mark.parametrize("name", LAKEFEED)
def test_mounts_and_paths(name):
    mounts = SERVICES[name]["volumes"]
    for folder in ("dags", "plugins", "include", "spark_jobs"):
        assert f"./{folder}:/opt/lakefeed/{folder}" in mounts
        assert (ROOT / folder).is_dir()
    env = SERVICES[name]["environment"]
    assert env["LAKEFEED_HOME"] == "/opt/lakefeed"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/lakefeed/dags"
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == "/opt/lakefeed/plugins"


@pytest.mark.parametrize("name", [n for n in SERVICES if n != "airflow-init"])
def test_long_running_services_have_health_checks(name):
    assert SERVICES[name]["healthcheck"]["test"]


def test_environment_is_what_the_code_reads():
    env = SERVICES["airflow-scheduler"]["environment"]
    config = BlobPipelineConfig.from_json(compose_value(env["AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG"]), "compose")
    assert config.feed_root == "az://$blobchangefeed"
    connection = json.loads(env[f"AIRFLOW_CONN_{config.wasb_conn_id.upper()}"])
    assert connection["conn_type"] == "wasb" and connection["host"].startswith("http://azurite:10000/")
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert (spark["conn_type"], spark["host"], spark["port"]) == ("spark", "spark://spark-master", 7077)
    assert (
        "postgresql" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        and "@postgres:5432/" in env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    )
    code = "\n".join(p.read_text() for p in (ROOT / "include").rglob("*.py"))
    for name in ("LAKEFEED_HOME", "LAKEFEED_DATA"):
        assert f'"{name}"' in code
    defaults = (ROOT / "plugins" / "lakefeed_airflow" / "dag_defaults.py").read_text()
    for constant in ("SPARK_POOL", "CHECKPOINT_POOL"):
        pool = re.search(constant + r' = "([^"]+)"', defaults).group(1)
        assert f"airflow pools set {pool} " in SERVICES["airflow-init"]["command"][0]
        assert f"airflow pools set {pool} " in (ROOT / "scripts" / "setup.sh").read_text()
