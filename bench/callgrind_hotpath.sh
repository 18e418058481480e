#!/usr/bin/env bash
# The recording hot path alone, quickly: instructions per event on the calling
# thread (callgrind, the difference of runs of CG_EVENTS/2 and 3*CG_EVENTS/2
# events, as bench/run.sh does) and ns/event (median of REPEATS timed runs,
# 1 thread) of libgaspard.so through bench/notify_bench.c, per scenario.
#
#   bash bench/callgrind_hotpath.sh [get user off ...]
#
# Settings (environment): LIB (target/release/libgaspard.so, built here unless
# set), CG_EVENTS (200000), REPEATS (7), EVENTS per timed run (2000000),
# KEEP=DIR to keep the callgrind outputs (recorded with --dump-instr=yes, for
# `callgrind_annotate --auto=yes`).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
CG_EVENTS=${CG_EVENTS:-200000}
REPEATS=${REPEATS:-7}
EVENTS=${EVENTS:-2000000}
SCENARIOS=${*:-get user off}
for v in $(env | sed -n 's/^\(GASPARD_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

if [ -z "${LIB:-}" ]; then
  cargo build --release -q -p gaspard-gasp
  LIB=$ROOT/target/release/libgaspard.so
fi
WORK=$(mktemp -d /tmp/gaspard-hot.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
CG_DIR=${KEEP:-$WORK/cg}
mkdir -p "$CG_DIR"
cc -O2 -g -Wall -Wextra -I"$ROOT/crates/gasp/include" bench/notify_bench.c -o "$WORK/notify_bench" \
  -pthread -ldl

NA=$((CG_EVENTS / 2))
NB=$((CG_EVENTS / 2 * 3))
calling_ir() { # scenario events: instructions of the calling thread
  local f
  GASPARD_DIR=$WORK/trace.$1.$2 valgrind --tool=callgrind --separate-threads=yes --dump-instr=yes \
    --callgrind-out-file="$CG_DIR/$1.$2.%p" "$WORK/notify_bench" --tool "$LIB" --scenario "$1" \
    --threads 1 --events "$2" --warmup 1000 >/dev/null 2>"$WORK/vg.log" ||
    { cat "$WORK/vg.log" >&2; exit 1; }
  rm -rf "$WORK/trace.$1.$2"
  for f in "$CG_DIR/$1.$2".*-01; do sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$f"; done
}
for sc in $SCENARIOS; do
  a=$(calling_ir "$sc" $NA)
  b=$(calling_ir "$sc" $NB)
  ns=()
  for ((r = 0; r < REPEATS; r++)); do
    line=$(GASPARD_DIR=$WORK/trace.t "$WORK/notify_bench" --tool "$LIB" --scenario "$sc" --threads 1 \
      --events "$EVENTS" --warmup 20000)
    rm -rf "$WORK/trace.t"
    ns+=("$(sed -n 's/.*ns_per_event=\([0-9.]*\).*/\1/p' <<<"$line")")
  done
  med=$(printf '%s\n' "${ns[@]}" | sort -g | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')
  echo "$sc: $(awk -v a="$a" -v b="$b" -v d=$((NB - NA)) 'BEGIN {printf "%.1f", (b - a) / d}') instructions/event" \
    "(calling thread), $med ns/event (median of $REPEATS: ${ns[*]})"
done
