#!/usr/bin/env bash
# `gaspard report` on a trace with many shared objects: bench/many_objects.c
# (3000 symmetric allocations x 100 puts, 2 PEs: 600,000 accesses) recorded
# once, then reported REPEATS times (median of wall and user time). BEFORE=BIN
# adds another build's `gaspard` binary, run on the same trace in the same
# interleaved rounds; both reports must be the same.
#
#   bash bench/many_objects.sh
#   BEFORE=/tmp/old/gaspard bash bench/many_objects.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-5}
BEFORE=${BEFORE:-}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release -p gaspard -p gaspard-gasp >&2
WORK=$(mktemp -d /tmp/gaspard-objects.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
oshcc -O2 bench/many_objects.c -o "$WORK/objs"
target/release/gaspard run -o "$WORK/trace" -- \
  oshrun -np 2 --oversubscribe --mca osc ^rdma "$WORK/objs" >&2
builds=("$ROOT/target/release/gaspard")
[ -n "$BEFORE" ] && builds=("$BEFORE" "${builds[@]}")
for ((r = 0; r < REPEATS; r++)); do
  for i in "${!builds[@]}"; do
    /usr/bin/time -f "%e %U" -a -o "$WORK/times.$i" "${builds[$i]}" report "$WORK/trace" --json >"$WORK/report.$i"
  done
done
if [ -n "$BEFORE" ]; then
  cmp -s "$WORK/report.0" "$WORK/report.1" || { echo "the two builds' reports differ" >&2; exit 1; }
fi
echo "| build | wall (median) | user (median) |"
echo "|---|---:|---:|"
for i in "${!builds[@]}"; do
  python3 - "$WORK/times.$i" "${builds[$i]}" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
print(f"| {sys.argv[2]} | {statistics.median(r[0] for r in rows):.2f} s | {statistics.median(r[1] for r in rows):.2f} s |")
PY
done
