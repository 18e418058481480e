#!/usr/bin/env bash
# The knobs for long runs, each measured against the default in the same run:
# filters (GASPARD_EXCLUDE), profile-only mode (GASPARD_PROFILE_ONLY) and
# throttling (GASPARD_THROTTLE). Prints a Markdown section; bench/run.sh
# appends it to BENCHMARKS.md.
#
#   bash bench/knobs.sh
#
# Settings (environment): REPEATS (5), EVENTS per run of the event driver
# (2000000), CG_EVENTS (200000: callgrind differences runs of CG_EVENTS/2
# and 3*CG_EVENTS/2 events), SORT_KEYS (1048576).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-5}
EVENTS=${EVENTS:-2000000}
CG_EVENTS=${CG_EVENTS:-200000}
SORT_KEYS=${SORT_KEYS:-1048576}
say() { printf '%s\n' "$*" >&2; }
for v in $(env | sed -n 's/^\(GASPARD_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done

cargo build --release -q -p gaspard -p gaspard-gasp
REL=$ROOT/target/release
BIN=$ROOT/target/bench/knobs
mkdir -p "$BIN"
INC=$ROOT/crates/gasp/include
cc -O2 -g -I"$INC" bench/notify_bench.c -o "$BIN/notify_bench" -pthread -ldl
"$REL/gaspard" cc --profile -- cc -O2 -g examples/c/sort.c -o "$BIN/sort_profiled"
WORK=$(mktemp -d /tmp/gaspard-knobs.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
RAW=$WORK/raw
: >"$RAW"

# The same stream of GASP_UPC_GET START/END pairs, one thread, per setting.
SETTINGS=(
  "default|"
  "filtered out (GASPARD_EXCLUDE=GASP_UPC_GET)|GASPARD_EXCLUDE=GASP_UPC_GET"
  "another kind filtered (GASPARD_EXCLUDE=GASP_UPC_PUT)|GASPARD_EXCLUDE=GASP_UPC_PUT"
  "profile-only (GASPARD_PROFILE_ONLY=1)|GASPARD_PROFILE_ONLY=1"
)
say "== event driver: $REPEATS repeats x ${#SETTINGS[@]} settings, $EVENTS events"
for ((r = 0; r < REPEATS; r++)); do
  for ((k = 0; k < ${#SETTINGS[@]}; k++)); do
    i=$(((k + r) % ${#SETTINGS[@]}))
    IFS='|' read -r name envs <<<"${SETTINGS[$i]}"
    d=$WORK/run.$i.$r
    line=$(env GASPARD_DIR="$d" $envs "$BIN/notify_bench" --tool "$REL/libgaspard.so" --scenario get \
      --threads 1 --events "$EVENTS" --warmup 20000)
    ns=$(sed -n 's/.*ns_per_event=\([0-9.]*\).*/\1/p' <<<"$line")
    bytes=$(du -sb "$d" | cut -f1)
    echo "T|$i|$ns|$bytes" >>"$RAW"
    rm -rf "$d"
  done
done
say "== callgrind"
NA=$((CG_EVENTS / 2))
NB=$((CG_EVENTS / 2 * 3))
for ((i = 0; i < ${#SETTINGS[@]}; i++)); do
  IFS='|' read -r name envs <<<"${SETTINGS[$i]}"
  for n in $NA $NB; do
    env GASPARD_DIR="$WORK/cg.$i.$n" $envs valgrind --tool=callgrind --separate-threads=yes \
      --callgrind-out-file="$WORK/cg.$i.$n.%p" "$BIN/notify_bench" --tool "$REL/libgaspard.so" \
      --scenario get --threads 1 --events "$n" --warmup 1000 >/dev/null 2>"$WORK/vg.log" ||
      { cat "$WORK/vg.log" >&2; exit 1; }
    main=0 other=0
    for f in "$WORK/cg.$i.$n".*-*; do
      ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$f")
      case $f in *-01) main=$((main + ir)) ;; *) other=$((other + ir)) ;; esac
    done
    echo "C|$i|$n|$main|$other" >>"$RAW"
  done
done
say "== throttling: instrumented sort, $REPEATS repeats"
for ((r = 0; r < REPEATS; r++)); do
  for t in default off; do
    d=$WORK/sort.$t.$r
    s=$(date +%s.%N)
    if [ "$t" = off ]; then
      GASPARD_THROTTLE=off "$REL/gaspard" run -o "$d" -- "$BIN/sort_profiled" "$SORT_KEYS" >/dev/null
    else
      "$REL/gaspard" run -o "$d" -- "$BIN/sort_profiled" "$SORT_KEYS" >/dev/null
    fi
    e=$(date +%s.%N)
    ev=$("$REL/gaspard" report "$d" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["events"])')
    echo "S|$t|$(awk "BEGIN {print $e - $s}")|$(du -sb "$d" | cut -f1)|$ev" >>"$RAW"
    rm -rf "$d"
  done
done

python3 - "$RAW" "$EVENTS" "$NA" "$NB" "$REPEATS" "$SORT_KEYS" "${SETTINGS[@]}" <<'EOF'
import statistics, sys
raw, events, na, nb, repeats, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
settings = [s.split("|")[0] for s in sys.argv[7:]]
T, C, S = {}, {}, {}
for l in open(raw):
    f = l.strip().split("|")
    if f[0] == "T":
        T.setdefault(int(f[1]), []).append((float(f[2]), int(f[3])))
    elif f[0] == "C":
        C[(int(f[1]), int(f[2]))] = (int(f[3]), int(f[4]))
    elif f[0] == "S":
        S.setdefault(f[1], []).append((float(f[2]), int(f[3]), int(f[4])))
print("## Knobs for long runs")
print()
print(f"`bash bench/knobs.sh` (REPEATS={repeats}, EVENTS={events}): `bench/notify_bench.c` sends the same")
print("GASP_UPC_GET START/END pairs on one thread through `libgaspard.so` under each setting; ns/event is the")
print("median of the runs, instructions/event the difference of two callgrind runs")
print(f"({na} and {nb} events) divided by the difference in events, on the calling thread and on")
print("gaspard's background thread; disk is everything the run left in its trace directory.")
print()
print("| setting | ns/event | instructions/event, calling thread | instructions/event, background | disk |")
print("|---|---|---|---|---|")
for i, name in enumerate(settings):
    ns = statistics.median(x[0] for x in T[i])
    disk = statistics.median(x[1] for x in T[i])
    a, b = C[(i, na)], C[(i, nb)]
    d = nb - na
    print(f"| {name} | {ns:.1f} | {(b[0] - a[0]) / d:.1f} | {(b[1] - a[1]) / d:.1f} | {disk / 1024:.0f} KiB |")
print()
print(f"Throttling: `examples/c/sort.c` built with `gaspard cc --profile` sorting {keys} keys (its")
print("recursive `sort` and `merge` are called millions of times, for well under 10 us each), median of the runs:")
print()
print("| GASPARD_THROTTLE | wall | events in the trace | disk |")
print("|---|---|---|---|")
for t, label in [("default", "default (100000,10)"), ("off", "off")]:
    w = statistics.median(x[0] for x in S[t])
    b = statistics.median(x[1] for x in S[t])
    e = statistics.median(x[2] for x in S[t])
    print(f"| {label} | {w:.2f} s | {e:,.0f} | {b / 1048576:.1f} MiB |")
EOF
