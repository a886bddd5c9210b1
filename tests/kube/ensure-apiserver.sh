#!/usr/bin/env bash
# Make sure etcd and the Kubernetes 1.20.2 binaries exist on this machine; print the
# kube-apiserver's path. Built once per machine from Debian's kubernetes source package
# (see ../shared/kube-apiserver.md) and cached outside the checkout.
#
#   ensure-apiserver.sh          kube-apiserver only (what `./x demo` needs)
#   ensure-apiserver.sh --node   also kubelet, kube-controller-manager and kube-scheduler
#                                (a real node: `./x test`, `./x demo --in-pod`), named
#                                `<command>-1.20.2` beside the API server
#   ensure-apiserver.sh --controller-manager
#                                kube-apiserver and kube-controller-manager (`tessera dev up`)
#
# The source tree stays in the cache, so building the node's commands after the API server
# reuses its compiled packages and costs little more than the difference.
set -euo pipefail
cache="${TESSERA_KUBE_CACHE:-$HOME/.cache/tessera/kube}"
bin="$cache/kube-apiserver-1.20.2"
commands="kube-apiserver"
case "${1:-}" in
  --node) commands="kube-apiserver kubelet kube-controller-manager kube-scheduler" ;;
  --controller-manager) commands="kube-apiserver kube-controller-manager" ;;
esac
built() { for c in $commands; do [ -x "$cache/$c-1.20.2" ] || return 1; done; }
if built && command -v etcd >/dev/null; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
# One build at a time (a demo and a test run may both start one).
exec 9>"$cache/.lock"
flock 9
if built && command -v etcd >/dev/null; then
  echo "$bin"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

tree="$cache/src/kubernetes-1.20.2"
if ! command -v etcd >/dev/null || [ ! -x /usr/lib/go-1.19/bin/go ] || ! command -v rsync >/dev/null \
    || [ ! -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] || [ ! -f "$tree/.tessera-prepared" ]; then
  if ! ls /etc/apt/sources.list.d/*.sources 2>/dev/null | xargs grep -l '^Types: deb-src' >/dev/null 2>&1; then
    src=$(ls /etc/apt/sources.list.d/*.sources | head -1)
    # A deb-src twin of the main Debian entry, bookworm main only.
    awk 'BEGIN{RS=""; ORS="\n\n"} index($0, "/debian\n") {print; exit}' "$src" \
      | sed -e 's/^Types: .*/Types: deb-src/' -e 's/^Suites: .*/Suites: bookworm/' -e 's/^Components: .*/Components: main/' \
      | as_root tee /etc/apt/sources.list.d/tessera-src.sources >/dev/null
  fi
  as_root apt-get update -qq >&2
  as_root apt-get install -y -qq etcd-server golang-1.19-go rsync golang-github-modern-go-reflect2-dev >&2
fi

if built; then
  echo "$bin"
  exit 0
fi
if [ ! -f "$tree/.tessera-prepared" ]; then
  rm -rf "$cache/src"
  mkdir -p "$cache/src"
  (
    cd "$cache/src"
    apt-get source --download-only kubernetes >&2
    tar xzf kubernetes_1.20.5+really1.20.2.orig.tar.gz
    rm -f kubernetes_*
  )
  # The vendored reflect2 1.0.1 crashes under Go >= 1.18 on the first custom-resource watch.
  rm -rf "$tree/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$tree/vendor/github.com/modern-go/reflect2"
  touch "$tree/.tessera-prepared"
fi
cd "$tree"
missing=""
for c in $commands; do [ -x "$cache/$c-1.20.2" ] || missing="$missing cmd/$c"; done
[ -n "$missing" ] || { echo "$bin"; exit 0; }
PATH=/usr/lib/go-1.19/bin:$PATH CGO_ENABLED=0 make WHAT="${missing# }" >&2
for c in $commands; do
  [ -x "$cache/$c-1.20.2" ] && continue
  cp "_output/bin/$c" "$cache/$c-1.20.2.tmp"
  mv "$cache/$c-1.20.2.tmp" "$cache/$c-1.20.2"
done
echo "$bin"
