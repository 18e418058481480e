#!/usr/bin/env bash
# The C sort of bench/programs.sh alone (examples/c/sort.c, 2^20 keys,
# built with `gaspard cc --profile -- cc -O2 -g`): REPEATS interleaved runs
# without gaspard, with gaspard and GASPARD_THROTTLE_PATCH=0 (throttled
# functions keep their hook calls) and with gaspard's defaults (their hook
# calls patched out, and the calls of throttled malloc and free call sites
# patched to call the C library directly); medians of wall time and of
# user+system CPU time. Prints a Markdown table.
#
# BEFORE=DIR adds a line for another build of gaspard (DIR holding its
# `gaspard` and `libgaspard.so`, e.g. copied from target/release at an older
# commit), run on the same binary in the same interleaved rounds.
#
#   bash bench/sort.sh            # REPEATS=11 by default
#   BEFORE=/tmp/old bash bench/sort.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-11}
BEFORE=${BEFORE:-}
KEYS=${KEYS:-1048576}
BIN="$ROOT/target/bench/programs"
REL="$ROOT/target/release"
G="$REL/gaspard"
mkdir -p "$BIN"
cargo build --release -q --workspace
INC="$ROOT/crates/gasp/include"
cc -O2 -g -I "$INC" examples/c/sort.c -o "$BIN/sort_plain"
"$G" cc --profile -- cc -O2 -g examples/c/sort.c -o "$BIN/sort_profiled"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
LOAD0=$(uptime)
# run NAME CMD...: appends "wall_ms cpu_ms" to $TMP/NAME.
run() {
  local name=$1
  shift
  rm -rf "$TMP/trace"
  local t0 t1 c0 c1
  c0=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  t0=$(date +%s%N)
  "$@" >/dev/null 2>&1
  t1=$(date +%s%N)
  c1=$(awk '{print $14 + $15 + $16 + $17}' /proc/$$/stat)
  echo "$(((t1 - t0) / 1000000)) $(((c1 - c0) * 1000 / $(getconf CLK_TCK)))" >>"$TMP/$name"
}
for _ in $(seq "$REPEATS"); do
  run none env -u GASPARD_DIR "$BIN/sort_plain" "$KEYS"
  run keep env GASPARD_THROTTLE_PATCH=0 "$G" run -o "$TMP/trace" -- "$BIN/sort_profiled" "$KEYS"
  run patch "$G" run -o "$TMP/trace" -- "$BIN/sort_profiled" "$KEYS"
  if [ -n "$BEFORE" ]; then
    # The program finds libgaspard.so through its RUNPATH, which
    # LD_LIBRARY_PATH overrides.
    run before env LD_LIBRARY_PATH="$BEFORE" "$BEFORE/gaspard" run -o "$TMP/trace" -- "$BIN/sort_profiled" "$KEYS"
  fi
done
RUNS="none keep patch"
if [ -n "$BEFORE" ]; then RUNS="none keep before patch"; fi
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "Load before: $LOAD0"
echo "Load after:  $(uptime)"
echo
echo "| run | wall (ms) | overhead | user+system CPU (ms) | overhead |"
echo "|---|---:|---:|---:|---:|"
w0=$(cut -d' ' -f1 "$TMP/none" | median)
c0=$(cut -d' ' -f2 "$TMP/none" | median)
for r in $RUNS; do
  w=$(cut -d' ' -f1 "$TMP/$r" | median)
  c=$(cut -d' ' -f2 "$TMP/$r" | median)
  case $r in
    none) label="without gaspard" ;;
    keep) label="gaspard, GASPARD_THROTTLE_PATCH=0" ;;
    before) label="gaspard from $BEFORE" ;;
    patch) label="gaspard (throttled hook calls and allocation calls patched)" ;;
  esac
  awk -v l="$label" -v w="$w" -v w0="$w0" -v c="$c" -v c0="$c0" 'BEGIN {
    printf "| %s | %.0f | %+.1f %% | %.0f | %+.1f %% |\n", l, w, (w - w0) / w0 * 100, c, (c - c0) / c0 * 100 }'
done
echo
echo "Raw runs (wall ms, CPU ms):"
for r in $RUNS; do echo "- $r: $(tr '\n' ',' <"$TMP/$r" | sed 's/,$//; s/,/; /g')"; done
