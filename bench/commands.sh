#!/usr/bin/env bash
# Wall time of shell commands side by side: ROUNDS rounds, each running every
# command once in the order given (the directory $TRACE removed before each,
# so that a command may record into it), then per command the median, its
# difference from the first command's median, and the sorted runs (ms).
#
#   bash bench/commands.sh ROUNDS NAME 'COMMAND' [NAME 'COMMAND']...
#
# e.g. the C sort without gaspard, throttled from the first call, at the
# default rule, and at the default rule through the launcher:
#   B=target/bench/programs
#   bash bench/commands.sh 15 plain "$B/sort_plain 1048576" \
#     t1 "GASPARD_DIR=\$TRACE GASPARD_THROTTLE=1,10 $B/sort_profiled 1048576" \
#     default "GASPARD_DIR=\$TRACE $B/sort_profiled 1048576" \
#     launcher "target/release/gaspard run -o \$TRACE -- $B/sort_profiled 1048576"
# (bench/programs.sh builds those programs.)
set -euo pipefail
[ $# -ge 3 ] && [ $(($# % 2)) = 1 ] || {
  echo "usage: bash bench/commands.sh ROUNDS NAME 'COMMAND' [NAME 'COMMAND']..." >&2
  exit 2
}
ROUNDS=$1
shift
export TRACE=${TRACE:-/tmp/gaspard-commands-trace}
names=()
cmds=()
while [ $# -gt 0 ]; do
  names+=("$1")
  cmds+=("$2")
  shift 2
done
OUT=$(mktemp)
trap 'rm -f "$OUT"; rm -rf "$TRACE"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 0; r < ROUNDS; r++)); do
  for i in "${!names[@]}"; do
    rm -rf "$TRACE"
    t0=$(date +%s%N)
    bash -c "${cmds[$i]}" >/dev/null 2>&1 || echo "${names[$i]}: exit status $?" >&2
    t1=$(date +%s%N)
    echo "${names[$i]} $(((t1 - t0) / 1000))" >>"$OUT"
  done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT" "${names[@]}" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, us = line.split()
    runs.setdefault(name, []).append(int(us) / 1000)
first = statistics.median(runs[sys.argv[2]])
for name in sys.argv[2:]:
    m = statistics.median(runs[name])
    print(f"{name:12s} {m:8.1f} ms {100 * (m - first) / first:+6.1f} %  {sorted(round(x, 1) for x in runs[name])}")
PY
