"""docker-compose.yaml as data, in a second: what the Docker test (tests/stack) proves by running it is
checked here before anything is built. Nothing shared but the database and the storage, no source
mounted, no credential on the Spark services, the DAGs configured on the demo data's layout."""

import json
from pathlib import Path

import yaml
from lakefeed_testing.demo_data import DemoLayout

from lakefeed.blob.config import BlobPipelineConfig

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yaml").read_text())
SERVICES = COMPOSE["services"]
EDGE_WORKERS = ["airflow-worker-1", "airflow-worker-2"]
SPARK = ["spark-master", "spark-worker-1", "spark-worker-2"]
AIRFLOW = ["airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"]


def compose_value(text: str) -> str:
    return text.replace("$$", "$")  # compose escapes a literal $ as $$


def test_services():
    assert set(SERVICES) == {"postgres", "azurite", *SPARK, *AIRFLOW, *EDGE_WORKERS}
    for name in [*SPARK, *AIRFLOW, *EDGE_WORKERS]:
        assert SERVICES[name]["image"] == "lakefeed:local"
        assert SERVICES[name]["build"]["dockerfile"] == "docker/Dockerfile"
    for name in EDGE_WORKERS:
        assert SERVICES[name]["command"][:3] == ["airflow", "edge", "worker"]
        assert SERVICES[name]["command"][-1] == name == SERVICES[name]["hostname"]
        # the name the executors reach this worker's Spark drivers by
        assert SERVICES[name]["environment"]["SPARK_LOCAL_HOSTNAME"] == name
    for name in ("spark-worker-1", "spark-worker-2"):
        command = SERVICES[name]["command"]
        assert command[1:3] == ["org.apache.spark.deploy.worker.Worker", "spark://spark-master:7077"]
        assert command[command.index("--host") + 1] == name


def test_official_images_unless_told_otherwise():
    assert SERVICES["postgres"]["image"] == "${LAKEFEED_POSTGRES_IMAGE:-postgres:16}"
    assert SERVICES["azurite"]["image"].startswith("${LAKEFEED_AZURITE_IMAGE:-mcr.microsoft.com/azure-storage/azurite:")
    args = SERVICES["airflow-scheduler"]["build"]["args"]
    assert args["PYTHON_IMAGE"] == "${LAKEFEED_PYTHON_IMAGE:-python:3.11-slim-bookworm}"
    assert "--disableTelemetry" in SERVICES["azurite"]["command"]  # Azurite reports usage to Azure by default


def test_nothing_shared_but_the_database_and_the_storage():
    """Each named volume belongs to one service (its own state); no bind mount of the source tree; the
    Edge workers have no metadata database that works; the Spark services carry no credential."""
    owners: dict[str, list[str]] = {}
    for name, service in SERVICES.items():
        for mount in service.get("volumes", []):
            source = mount.split(":")[0]
            assert not source.startswith((".", "/")), f"{name} mounts {mount}: the image holds the code"
            owners.setdefault(source, []).append(name)
    assert owners == {"postgres-data": ["postgres"], "azurite-data": ["azurite"]}
    for name in EDGE_WORKERS:
        assert SERVICES[name]["environment"]["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("sqlite:////tmp/")
    for name in SPARK:
        env = SERVICES[name]["environment"]
        assert not [key for key in env if key.startswith(("AIRFLOW_CONN_", "AZURE_"))], name


def test_the_dags_are_configured_on_the_demo_layout():
    env = SERVICES["airflow-scheduler"]["environment"]
    layout = DemoLayout.azure()
    for variable, expected in layout.dag_configs("wasb_lake").items():
        configured = json.loads(compose_value(env[f"AIRFLOW_VAR_{variable.upper()}"]))
        configured.pop("spark_conf")
        assert configured == expected, variable
    config = BlobPipelineConfig.from_json(compose_value(env["AIRFLOW_VAR_LAKEFEED_BLOB_CONFIG"]), "compose")
    assert config.feed_root == "az://$blobchangefeed"
    connection = json.loads(env["AIRFLOW_CONN_WASB_LAKE"])
    assert "BlobEndpoint=http://azurite:10000/devstoreaccount1;" in connection["extra"]["connection_string"]
    spark = json.loads(env["AIRFLOW_CONN_SPARK_DEFAULT"])
    assert (spark["conn_type"], spark["host"], spark["port"]) == ("spark", "spark://spark-master", 7077)


def test_the_image_carries_runtime_only():
    runtime = (ROOT / "requirements.txt").read_text()
    for tool in ("pytest", "ruff", "mypy", "hypothesis", "playwright"):
        assert f"\n{tool}==" not in runtime and f"\n{tool}" in (ROOT / "requirements-dev.txt").read_text()
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    assert "-r /opt/lakefeed/requirements.txt" in dockerfile and "requirements-dev" not in dockerfile
    assert "LAKEFEED_JARS_DIR=/opt/lakefeed/jars" in dockerfile
