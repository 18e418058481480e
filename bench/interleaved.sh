#!/usr/bin/env bash
# Time per event of several GASP tool libraries side by side: REPEATS rounds,
# each running bench/notify_bench.c once per scenario and library (1 thread,
# EVENTS events, the order of the libraries rotated from round to round), then
# the median and the minimum per scenario and library, and the load average.
#
#   bash bench/interleaved.sh LIB.so...
#
# Settings (environment): REPEATS (11), EVENTS (2000000), SCENARIOS
# ("get user off"). The libraries are given as paths, e.g.
# target/release/libgaspard.so, a copy of it built from another revision, and
# target/bench/libotf2_tool.so (built by bench/run.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPEATS=${REPEATS:-11}
EVENTS=${EVENTS:-2000000}
SCENARIOS=${SCENARIOS:-get user off}
[ $# -ge 1 ] || { echo "usage: bash bench/interleaved.sh LIB.so..." >&2; exit 2; }
for v in $(env | sed -n 's/^\(GASPARD_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset BENCH_OTF2_DIR BENCH_OTF2_CLOCK
WORK=$(mktemp -d /tmp/gaspard-interleaved.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cc -O2 -g -Wall -Wextra -I"$ROOT/crates/gasp/include" "$ROOT/bench/notify_bench.c" \
  -o "$WORK/notify_bench" -pthread -ldl
libs=()
for l in "$@"; do libs+=("$(cd "$(dirname "$l")" && pwd)/$(basename "$l")"); done
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < REPEATS; r++)); do
  for sc in $SCENARIOS; do
    for ((k = 0; k < ${#libs[@]}; k++)); do
      i=$(((k + r) % ${#libs[@]}))
      line=$(GASPARD_DIR=$WORK/trace BENCH_OTF2_DIR=$WORK/archive "$WORK/notify_bench" \
        --tool "${libs[$i]}" --scenario "$sc" --threads 1 --events "$EVENTS" --warmup 20000)
      rm -rf "$WORK/trace" "$WORK/archive"
      echo "$sc $i $(sed -n 's/.*ns_per_event=\([0-9.]*\).*/\1/p' <<<"$line")" >>"$WORK/raw"
    done
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for sc in $SCENARIOS; do
  for ((i = 0; i < ${#libs[@]}; i++)); do
    awk -v sc="$sc" -v i="$i" '$1 == sc && $2 == i {print $3}' "$WORK/raw" | sort -g |
      awk -v sc="$sc" -v lib="${libs[$i]}" '{v[NR] = $1} END {
        printf "%s %s: median %.2f ns/event, min %.2f (%d runs)\n", sc, lib, v[int((NR + 1) / 2)], v[1], NR}'
  done
done
