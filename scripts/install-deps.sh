#!/usr/bin/env bash
# Installs what gaspard needs on a Debian machine (idempotent). The Rust
# toolchain (cargo) must already be there.
set -euo pipefail
PKGS=(build-essential pkg-config clang libomp-dev libopenmpi-dev openmpi-bin gfortran libcoarrays-openmpi-dev libopen-trace-format2-dev otf2-tools valgrind protobuf-compiler python3 python3-pip chromium chromium-driver)
# `--bench`: also what `make bench` compares gaspard with (LTTng-UST).
if [ "${1:-}" = "--bench" ]; then
  PKGS+=(liblttng-ust-dev lttng-tools babeltrace)
fi
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
# DuckDB (Python) queries the Parquet tables of `gaspard export` in the tests.
python3 -c 'import duckdb' 2>/dev/null || python3 -m pip install -q duckdb || python3 -m pip install -q --break-system-packages duckdb
command -v cargo >/dev/null || { echo "cargo not found: install Rust (rustup) first" >&2; exit 1; }
