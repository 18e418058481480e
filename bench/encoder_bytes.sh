#!/usr/bin/env bash
# Checks that the C encoder of the working tree writes the same bytes as that
# of another revision (default HEAD) for the events of bench/encoder_bytes.c,
# with a clock set by the driver (so the time deltas are the same).
#
#   bash bench/encoder_bytes.sh [REV] [EVENTS...]
#
# NEW_CFLAGS adds flags to the working tree's build (e.g.
# -DGASPARD_PORTABLE_VARARGS, to check the va_arg reading of the varargs).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REV=${1:-HEAD}
shift || true
COUNTS=${*:-60000 200000 333333}
WORK=$(mktemp -d /tmp/gaspard-bytes.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/old"
# The working tree's stub (bench/hotpath_stub.c) for both: it stands for the Rust side.
git archive "$REV" crates/gasp/csrc crates/gasp/include crates/recorder/csrc |
  tar -x -C "$WORK/old"
cat >"$WORK/clock.h" <<'H'
#include <x86intrin.h>
#include <stdint.h>
extern uint64_t fake_now;
#define __rdtsc() fake_now
H
cat >"$WORK/clock.c" <<'C'
#include <stdint.h>
uint64_t fake_now;
__attribute__((visibility("default"))) void fake_set(uint64_t t) { fake_now = t; }
C
lib() { # source root, output, flags...
  local src=$1 out=$2
  shift 2
  cc "$@" -O2 -Wall -Wextra -fPIC -shared -fvisibility=hidden -include "$WORK/clock.h" \
    -I"$src/crates/gasp/include" -I"$src/crates/recorder/csrc" "$ROOT/bench/hotpath_stub.c" \
    "$src/crates/gasp/csrc/gasp_shim.c" "$src/crates/recorder/csrc/recorder.c" "$WORK/clock.c" -o "$out" -pthread
}
lib "$WORK/old" "$WORK/libold.so"
# shellcheck disable=SC2086
lib "$ROOT" "$WORK/libnew.so" ${NEW_CFLAGS:-}
cc -O2 -Wall -I"$ROOT/crates/gasp/include" bench/encoder_bytes.c -o "$WORK/encoder_bytes" -ldl
for n in $COUNTS; do
  "$WORK/encoder_bytes" "$WORK/libold.so" "$n" >"$WORK/old.bin"
  "$WORK/encoder_bytes" "$WORK/libnew.so" "$n" >"$WORK/new.bin"
  if cmp -s "$WORK/old.bin" "$WORK/new.bin"; then
    echo "$n events: same $(stat -c %s "$WORK/new.bin") bytes as $REV"
  else
    echo "$n events: the bytes differ from $REV" >&2
    exit 1
  fi
done
