#!/usr/bin/env bash
# `make ui`: Airflow standalone (api-server, scheduler, dag-processor, triggerer, LocalExecutor workers),
# stopped cleanly by Ctrl-C. Standalone alone does not: on Ctrl-C its api-server goes first, the others
# log connection errors, and standalone itself hangs over its exited children. Here it runs in a process
# group of its own; Ctrl-C (or TERM) sends TERM to the whole group, waits up to
# LAKEFEED_UI_STOP_SECONDS (default 20) for every process in it to end, then kills what is left.
set -u
# Two DAG bundles unless you configured your own: the pipelines (dags/) and the example downstream DAG
# (include/examples/), which runs on the blob pipeline's asset events as shipped.
if [ -z "${AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST:-}" ]; then
  _local="airflow.dag_processing.bundles.local.LocalDagBundle"
  export AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST="[{\"name\": \"dags-folder\", \"classpath\": \"$_local\", \"kwargs\": {}}, {\"name\": \"lakefeed-examples\", \"classpath\": \"$_local\", \"kwargs\": {\"path\": \"$LAKEFEED_HOME/include/examples\"}}]"
  unset _local
fi
setsid airflow standalone &
group=$!

stop() {
  trap '' INT TERM
  echo "lakefeed ui: stopping Airflow (up to ${LAKEFEED_UI_STOP_SECONDS:-20} s)..." >&2
  kill -TERM -- "-$group" 2>/dev/null
  for _ in $(seq 1 $(( ${LAKEFEED_UI_STOP_SECONDS:-20} * 4 ))); do
    pgrep -g "$group" >/dev/null || break
    sleep 0.25
  done
  if pgrep -g "$group" >/dev/null; then
    echo "lakefeed ui: killing what did not stop" >&2
    kill -KILL -- "-$group" 2>/dev/null
  fi
  wait "$group" 2>/dev/null
  echo "lakefeed ui: stopped" >&2
  exit 0
}
trap stop INT TERM
wait "$group"
