#!/usr/bin/env bash
# Make sure componentize-py (Python → Wasm components, from PyPI) is installed in a venv
# under ~/.cache/tessera/python; print the path of its command. Pinned: the components it
# makes must keep loading in this host's wasmtime.
set -euo pipefail
version=0.17.2
venv="${TESSERA_CACHE:-$HOME/.cache/tessera}/python/venv"
bin="$venv/bin/componentize-py"
if [ ! -x "$bin" ] || [ "$("$bin" --version 2>/dev/null)" != "componentize-py $version" ]; then
  if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c 'import ensurepip' 2>/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
    as_root apt-get update -qq >&2
    as_root apt-get install -y -qq python3-venv >&2
  fi
  rm -rf "$venv"
  python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q "componentize-py==$version" >&2
fi
echo "$bin"
