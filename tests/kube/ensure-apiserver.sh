#!/usr/bin/env bash
# Make sure etcd and the Kubernetes 1.20.2 binaries exist on this machine; print the
# kube-apiserver's path (kubelet, kube-controller-manager and kube-scheduler sit beside it,
# named `<command>-1.20.2`). Built once per machine from Debian's kubernetes source package
# (see ../shared/kube-apiserver.md) in one `make`, and cached outside the checkout.
set -euo pipefail
cache="${TESSERA_KUBE_CACHE:-$HOME/.cache/tessera/kube}"
bin="$cache/kube-apiserver-1.20.2"
commands="kube-apiserver kubelet kube-controller-manager kube-scheduler"
built() { for c in $commands; do [ -x "$cache/$c-1.20.2" ] || return 1; done; }
if built && command -v etcd >/dev/null; then
  echo "$bin"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! ls /etc/apt/sources.list.d/*.sources 2>/dev/null | xargs grep -l '^Types: deb-src' >/dev/null 2>&1; then
  src=$(ls /etc/apt/sources.list.d/*.sources | head -1)
  # A deb-src twin of the main Debian entry, bookworm main only.
  awk 'BEGIN{RS=""; ORS="\n\n"} index($0, "/debian\n") {print; exit}' "$src" \
    | sed -e 's/^Types: .*/Types: deb-src/' -e 's/^Suites: .*/Suites: bookworm/' -e 's/^Components: .*/Components: main/' \
    | as_root tee /etc/apt/sources.list.d/tessera-src.sources >/dev/null
fi
as_root apt-get update -qq >&2
as_root apt-get install -y -qq etcd-server golang-1.19-go rsync golang-github-modern-go-reflect2-dev >&2

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
apt-get source --download-only kubernetes >&2
tar xzf kubernetes_1.20.5+really1.20.2.orig.tar.gz
cd kubernetes-1.20.2
# The vendored reflect2 1.0.1 crashes under Go >= 1.18 on the first custom-resource watch.
rm -rf vendor/github.com/modern-go/reflect2
cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
# One make for all four: they share most packages, so this costs little over the API server.
PATH=/usr/lib/go-1.19/bin:$PATH CGO_ENABLED=0 \
  make WHAT="$(for c in $commands; do printf 'cmd/%s ' "$c"; done)" >&2
mkdir -p "$cache"
for c in $commands; do
  cp "_output/bin/$c" "$cache/$c-1.20.2.tmp"
  mv "$cache/$c-1.20.2.tmp" "$cache/$c-1.20.2"
done
echo "$bin"
