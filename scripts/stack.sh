#!/usr/bin/env bash
# The full local stack (docker-compose.yaml) in Docker.
#
#   scripts/stack.sh up       # `make stack`: build the images, start every service, wait until healthy
#   scripts/stack.sh down     # `make stack-down`: remove every container, network and volume it made
#   scripts/stack.sh check    # every target of the three DAGs against the demo data's ground truth
#   scripts/stack.sh compose ARGS...   # docker compose with the stack's project and images
#
# Images come from docker/images.sh (official where a registry is reachable, else built from Debian's
# packages). The Docker engine must be running; as root on a machine without one running (a CI machine),
# `up` starts dockerd itself (no iptables rules, no IP forwarding: containers reach only this machine).
# LAKEFEED_STACK_PROJECT names the compose project (default: lakefeed); LAKEFEED_API_PORT,
# LAKEFEED_AZURITE_PORT and LAKEFEED_SPARK_UI_PORT move the published ports (8080, 10000, 8081).
set -euo pipefail
cd "$(dirname "$0")/.."
export COMPOSE_PROJECT_NAME=${LAKEFEED_STACK_PROJECT:-lakefeed}
HEALTH_TIMEOUT=${LAKEFEED_STACK_TIMEOUT_SECONDS:-1200}

log() { echo "stack: $*" >&2; }

compose() {
  if docker compose version >/dev/null 2>&1; then
    docker compose "$@"
  elif command -v docker-compose >/dev/null 2>&1; then
    docker-compose "$@"
  else
    log "neither 'docker compose' nor 'docker-compose' is installed"
    exit 1
  fi
}

ensure_tools() {
  # What the stack needs on a Debian machine that lacks it: a Docker engine, compose, and debootstrap (base
  # images where no registry is reachable). Elsewhere, install Docker yourself.
  local need=()
  command -v docker >/dev/null 2>&1 || command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  if ! docker info >/dev/null 2>&1 && ! command -v dockerd >/dev/null 2>&1; then need+=(docker.io); fi
  docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
  command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
  if [ ${#need[@]} -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing $(printf '%s\n' "${need[@]}" | sort -u | tr '\n' ' ')"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
  fi
}

ensure_docker() {
  ensure_tools
  if docker info >/dev/null 2>&1; then
    return
  fi
  if ! start_dockerd; then
    log "the Docker engine is not running (start it, or run as root where dockerd is installed)"
    exit 1
  fi
}

start_dockerd() {
  # As root where dockerd is installed: start the engine (its containers, volumes and networks are on disk
  # and come back with it: the services' restart policy starts an earlier stack's containers again).
  if [ "$(id -u)" != 0 ] || ! command -v dockerd >/dev/null 2>&1; then
    return 1
  fi
  log "starting dockerd"
  mkdir -p /var/log
  nohup dockerd --storage-driver=overlay2 --iptables=false --ip-forward=false >/var/log/lakefeed-dockerd.log 2>&1 &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && return
    sleep 1
  done
  log "dockerd did not start: see /var/log/lakefeed-dockerd.log"
  return 1
}

images_env() {
  # The image names compose reads; the images are built when missing or when their inputs changed
  # (Docker's layer cache makes a rebuild of unchanged inputs take seconds).
  eval "$(docker/images.sh)"
}

wait_healthy() {
  local started=$SECONDS services
  services=$(compose config --services)
  while true; do
    local pending=() failed=()
    for service in $services; do
      local id state
      id=$(compose ps -q "$service" 2>/dev/null | head -1)
      if [ -z "$id" ]; then
        pending+=("$service(no container)")
        continue
      fi
      state=$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{else}}none{{end}} {{.State.ExitCode}}' "$id")
      case "$state" in
        "running healthy "* | "running none "*) ;;
        "exited none 0") ;;  # the init, done
        "exited "*) failed+=("$service(exit ${state##* })") ;;
        *) pending+=("$service(${state% *})") ;;
      esac
    done
    if [ ${#failed[@]} -gt 0 ]; then
      log "failed: ${failed[*]}"
      for service in "${failed[@]}"; do compose logs --tail 40 "${service%%(*}" >&2 || true; done
      return 1
    fi
    if [ ${#pending[@]} -eq 0 ]; then
      log "every service healthy after $((SECONDS - started))s"
      return 0
    fi
    if [ $((SECONDS - started)) -gt "$HEALTH_TIMEOUT" ]; then
      log "not healthy after ${HEALTH_TIMEOUT}s: ${pending[*]}"
      return 1
    fi
    sleep 3
  done
}

command=${1:-up}
shift || true
case "$command" in
  up)
    ensure_docker
    images_env
    log "starting project $COMPOSE_PROJECT_NAME"
    compose up -d --no-build
    wait_healthy
    log "Airflow on http://localhost:${LAKEFEED_API_PORT:-8080} (admin/admin), Azurite on" \
      "http://localhost:${LAKEFEED_AZURITE_PORT:-10000}/devstoreaccount1, Spark master UI on" \
      "http://localhost:${LAKEFEED_SPARK_UI_PORT:-8081}"
    ;;
  down)
    # An engine that is not running still holds what an interrupted session left (containers, volumes with
    # their tables and checkpoints): start it to remove them, else they come back with the next engine.
    if ! docker info >/dev/null 2>&1 && [ -d /var/lib/docker ]; then
      ensure_tools  # compose, to remove them
      start_dockerd || true
    fi
    if docker info >/dev/null 2>&1; then
      compose down --volumes --remove-orphans --timeout 20
    fi
    ;;
  check)
    compose run --rm --no-deps airflow-init python -m lakefeed_testing.demo_data check --wasb-conn-id wasb_lake
    ;;
  compose)
    compose "$@"
    ;;
  *)
    log "unknown command $command (up, down, check, compose)"
    exit 2
    ;;
esac
