#!/usr/bin/env bash
# Installs the Debian packages libzs builds and tests with (root, or sudo).
# Idempotent and quiet when everything is already there.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang liblz4-dev libzstd-dev liblzo2-dev libxxhash-dev liblzma-dev
      xz-utils libjemalloc-dev libmimalloc-dev valgrind python3 python3-pip python3-venv
      python3-matplotlib python3-pytest mypy python3-dev python3-lz4 python3-zstandard librocksdb-dev rocksdb-tools)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
