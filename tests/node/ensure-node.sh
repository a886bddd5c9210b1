#!/usr/bin/env bash
# Make sure a node can run here: Debian's containerd, runc and CNI plugins, and a pause
# image built locally (no registry reachable, no container engine). Prints the directory
# holding `pause.tar`, an OCI image layout of `tessera.test/pause:1` loadable with
# `ctr images import`. kubelet, kube-controller-manager and kube-scheduler come from
# `tests/kube/ensure-apiserver.sh --node` (same source, same cache).
set -euo pipefail
cache="${TESSERA_NODE_CACHE:-$HOME/.cache/tessera/node}"
if [ -s "$cache/pause.tar" ] && command -v containerd >/dev/null && command -v runc >/dev/null \
    && [ -x /usr/lib/cni/bridge ]; then
  echo "$cache"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v containerd >/dev/null || ! command -v runc >/dev/null || [ ! -x /usr/lib/cni/bridge ]; then
  for attempt in 1 2 3 4 5; do
    as_root apt-get update -qq >&2 || true
    as_root apt-get install -y -qq containerd runc containernetworking-plugins >&2 && break
    echo "apt-get busy or failed (attempt $attempt); retrying" >&2
    sleep 20
  done
fi
# Debian starts containerd as a service; tests start their own, each with its own socket.
as_root systemctl disable --now containerd >/dev/null 2>&1 || true

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
# The pause program: the pod sandbox's process, and the container the test modules run.
# As PID 1 it must handle SIGTERM itself, or the kernel ignores the signal.
cat > pause.c <<'C'
#include <signal.h>
#include <unistd.h>
static void stop(int sig) { (void)sig; _exit(0); }
int main(void) {
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  for (;;) pause();
}
C
mkdir -p rootfs layout/blobs/sha256
gcc -static -Os -s -o rootfs/pause pause.c
# Fixed order, owners and times: the same bytes, and so the same digest, on every machine
# with the same compiler.
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C rootfs -cf layer.tar pause
gzip -n -9 -c layer.tar > layer.tar.gz
blob() { # file -> digest; copies it into the layout
  local d; d=$(sha256sum "$1" | cut -d' ' -f1); cp "$1" "layout/blobs/sha256/$d"; echo "$d"
}
size() { stat -c %s "$1"; }
diff_id=$(sha256sum layer.tar | cut -d' ' -f1)
layer=$(blob layer.tar.gz)
printf '{"architecture":"amd64","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"os":"linux","rootfs":{"diff_ids":["sha256:%s"],"type":"layers"}}' \
  "$diff_id" > config.json
config=$(blob config.json)
printf '{"config":{"digest":"sha256:%s","mediaType":"application/vnd.oci.image.config.v1+json","size":%s},"layers":[{"digest":"sha256:%s","mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","size":%s}],"mediaType":"application/vnd.oci.image.manifest.v1+json","schemaVersion":2}' \
  "$config" "$(size config.json)" "$layer" "$(size layer.tar.gz)" > manifest.json
manifest=$(blob manifest.json)
printf '{"manifests":[{"annotations":{"org.opencontainers.image.ref.name":"1"},"digest":"sha256:%s","mediaType":"application/vnd.oci.image.manifest.v1+json","size":%s}],"schemaVersion":2}' \
  "$manifest" "$(size manifest.json)" > layout/index.json
printf '{"imageLayoutVersion":"1.0.0"}' > layout/oci-layout
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C layout -cf pause.tar .
mkdir -p "$cache"
cp pause.tar "$cache/pause.tar.tmp"
mv "$cache/pause.tar.tmp" "$cache/pause.tar"
echo "$cache"
