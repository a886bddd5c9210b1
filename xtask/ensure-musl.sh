#!/usr/bin/env bash
# Make sure the pinned toolchain has the x86_64-unknown-linux-musl target and that musl-gcc
# (Debian's musl-tools: the C compiler for crates with C code, ring and aws-lc-sys) is
# installed, for `./x image`'s static host; print musl-gcc's path.
set -euo pipefail
cd "$(dirname "$0")/.."
target=x86_64-unknown-linux-musl
channel=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
if ! rustup target list --toolchain "$channel" --installed 2>/dev/null | grep -qx "$target"; then
  rustup target add --toolchain "$channel" "$target" >&2
fi
if ! command -v musl-gcc >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
  as_root apt-get update -qq >&2
  as_root apt-get install -y -qq musl-tools >&2
fi
command -v musl-gcc
