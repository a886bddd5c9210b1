#!/usr/bin/env bash
# Make sure Debian's prometheus (the server and promtool) is installed; print the directory
# holding both. The tests start the server themselves on 127.0.0.1 with a temporary
# configuration and storage directory.
set -euo pipefail
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq >&2
  # policy-rc.d may refuse to start the packaged service; we never use it.
  as_root apt-get install -y -qq --no-install-recommends prometheus >&2
fi
dirname "$(command -v promtool)"
