# Source me: the environment every local command runs in (the Makefile does).
# Airflow: SQLite metadata under .airflow/, this project's dags/ and plugins/,
# Spark through spark_default = local[*] (JSON form: an unescaped local[*]
# URI silently falls back to yarn).
_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export LAKEFEED_HOME="$_root"
export PATH="$_root/.venv/bin:$PATH"
export PYSPARK_PYTHON="$_root/.venv/bin/python"
export PYSPARK_DRIVER_PYTHON="$_root/.venv/bin/python"
export SPARK_LOCAL_IP=127.0.0.1
export PYTHONUNBUFFERED=1
export AIRFLOW_HOME="${AIRFLOW_HOME:-$_root/.airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$_root/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$_root/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=False
# Task slots sized to the machine (Airflow's default, 32, starts 32 LocalExecutor workers on 2 cores): two
# per core, at least 4. Waiting sensors are deferred to the triggerer and hold none.
if [ -z "${AIRFLOW__CORE__PARALLELISM:-}" ]; then
  _cores="$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)"
  export AIRFLOW__CORE__PARALLELISM="$(( _cores * 2 > 4 ? _cores * 2 : 4 ))"
  unset _cores
fi
# (Not "${VAR:-{…}}": its first "}" closes the expansion, so a second `source` appended a "}" and broke the JSON.)
if [ -z "${AIRFLOW_CONN_SPARK_DEFAULT:-}" ]; then
  export AIRFLOW_CONN_SPARK_DEFAULT='{"conn_type": "spark", "host": "local[*]"}'
fi
unset _root
