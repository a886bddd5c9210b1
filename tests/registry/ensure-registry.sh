#!/usr/bin/env bash
# Make sure Debian's docker-registry (the CNCF distribution server) is installed; print its
# path. The tests start it themselves on 127.0.0.1 with a temporary config.
set -euo pipefail
if ! command -v docker-registry >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq >&2
  # policy-rc.d may refuse to start the packaged service; we never use it.
  as_root apt-get install -y -qq docker-registry >&2
fi
command -v docker-registry
