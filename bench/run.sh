#!/usr/bin/env bash
# The cost of an event through gaspard's GASP library, side by side with a
# no-op GASP tool (the floor of the interface) and with OTF2's event writer
# (the writer Score-P uses). Writes BENCHMARKS.md at the repository root.
#
#   bash bench/run.sh
#
# Settings (environment): REPEATS (11), EVENTS per thread per run (2000000),
# WARMUP events per thread before timing (20000), CG_EVENTS (200000: the
# callgrind runs difference runs of CG_EVENTS/2 and 3*CG_EVENTS/2 events),
# LONG_EVENTS (40000000) and LONG_REPEATS (3) for the sustained-rate runs,
# OUT (BENCHMARKS.md), EVENTS_ONLY=1 to stop after the per-event part. Needs cargo, cc, pkg-config with otf2, valgrind; for the
# LTTng-UST peer, liblttng-ust-dev, lttng-tools and babeltrace (installed by
# `make bench` through scripts/install-deps.sh --bench; left out when missing).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-11}
EVENTS=${EVENTS:-2000000}
WARMUP=${WARMUP:-20000}
CG_EVENTS=${CG_EVENTS:-200000}
LONG_EVENTS=${LONG_EVENTS:-40000000}
LONG_REPEATS=${LONG_REPEATS:-3}
OUT=${OUT:-BENCHMARKS.md}
CC=${CC:-cc}
THREADS_LIST="1 2"
SCENARIOS="get user off"
TOOLS="gaspard noop otf2 hotpath"
LTTNG=0
if pkg-config --exists lttng-ust 2>/dev/null && command -v lttng >/dev/null && command -v lttng-sessiond >/dev/null &&
  command -v babeltrace >/dev/null; then
  LTTNG=1
  TOOLS="$TOOLS lttng"
fi

# Only the settings made here reach the tools.
for v in $(env | sed -n 's/^\(GASPARD_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
unset BENCH_OTF2_DIR BENCH_OTF2_CLOCK

say() { printf '%s\n' "$*" >&2; }

# --- build -----------------------------------------------------------------
say "== building (release)"
cargo build --release -p gaspard-gasp -p gaspard >&2
BIN=$ROOT/target/bench
mkdir -p "$BIN"
INC="-I$ROOT/crates/gasp/include"
CFLAGS="-O2 -g -Wall -Wextra"
$CC $CFLAGS -fPIC -shared -fvisibility=hidden $INC bench/noop_tool.c -o "$BIN/libnoop_tool.so"
# shellcheck disable=SC2046
$CC $CFLAGS -fPIC -shared -fvisibility=hidden $INC $(pkg-config --cflags otf2) bench/otf2_tool.c \
  -o "$BIN/libotf2_tool.so" $(pkg-config --libs otf2) -pthread
$CC $CFLAGS -fPIC -shared -fvisibility=hidden $INC -I"$ROOT/crates/recorder/csrc" \
  bench/hotpath_stub.c crates/gasp/csrc/gasp_shim.c crates/recorder/csrc/recorder.c -o "$BIN/libgaspard_hotpath.so" -pthread
$CC $CFLAGS $INC bench/notify_bench.c -o "$BIN/notify_bench" -pthread -ldl
if [ $LTTNG = 1 ]; then
  $CC $CFLAGS -fPIC -shared -fvisibility=hidden $INC -Ibench bench/lttng_tool.c -o "$BIN/liblttng_tool.so" \
    $(pkg-config --libs lttng-ust) -ldl
fi

lib_of() {
  case $1 in
    gaspard) echo "$ROOT/target/release/libgaspard.so" ;;
    noop) echo "$BIN/libnoop_tool.so" ;;
    otf2) echo "$BIN/libotf2_tool.so" ;;
    hotpath) echo "$BIN/libgaspard_hotpath.so" ;;
    lttng) echo "$BIN/liblttng_tool.so" ;;
  esac
}

# LTTng: the session daemon (started here unless one runs already, and then
# stopped at the end), one session per run.
SESSIOND_STARTED=0
if [ $LTTNG = 1 ] && ! pgrep -x lttng-sessiond >/dev/null; then
  if lttng-sessiond --daemonize >/dev/null 2>&1; then
    SESSIOND_STARTED=1
  else
    say "lttng-sessiond does not start: no LTTng peer"
    LTTNG=0
    TOOLS=${TOOLS% lttng}
  fi
fi
stop_lttng() {
  if [ $SESSIOND_STARTED = 1 ]; then pkill -x lttng-sessiond || true; fi
}
# lttng_session DIR CMD...: runs CMD with a live session writing to DIR.
lttng_session() {
  local out=$1 name
  shift
  name=bench$$_$RANDOM
  lttng create "$name" --output="$out" >/dev/null
  lttng enable-channel -u --subbuf-size=4M --num-subbuf=8 ch >/dev/null
  lttng enable-event -u -c ch 'gaspard_bench:*' >/dev/null
  lttng start >/dev/null
  "$@"
  lttng stop >/dev/null
  lttng destroy "$name" >/dev/null
}

WORK=$(mktemp -d /tmp/gaspard-bench.XXXXXX)
trap 'rm -rf "$WORK"; stop_lttng' EXIT
RAW=$WORK/raw.txt
: >"$RAW"
CG_DIR=$BIN/callgrind
rm -rf "$CG_DIR"
mkdir -p "$CG_DIR"

sum_sizes() { # dir, name pattern: total bytes of matching files
  find "$1" -type f -name "$2" -printf '%s\n' | awk '{s += $1} END {print s + 0}'
}

# run_one TOOL SCENARIO THREADS EVENTS WARMUP [wrapper...]: one run, one RESULT line
run_one() {
  local tool=$1 sc=$2 t=$3 n=$4 w=$5
  shift 5
  local d line extra=""
  d=$(mktemp -d "$WORK/run.XXXXXX")
  case $tool in
    gaspard)
      line=$(GASPARD_DIR=$d/trace "$@" "$BIN/notify_bench" --tool "$(lib_of "$tool")" \
        --label "$tool" --scenario "$sc" --threads "$t" --events "$n" --warmup "$w")
      extra="bytes=$(sum_sizes "$d" '*.gst') all_bytes=$(sum_sizes "$d" '*')"
      ;;
    otf2)
      line=$(BENCH_OTF2_DIR=$d/archive "$@" "$BIN/notify_bench" --tool "$(lib_of "$tool")" \
        --label "$tool" --scenario "$sc" --threads "$t" --events "$n" --warmup "$w")
      extra="bytes=$(sum_sizes "$d" '*.evt') all_bytes=$(sum_sizes "$d" '*')"
      ;;
    lttng)
      line=$(lttng_session "$d/lttng" "$@" "$BIN/notify_bench" --tool "$(lib_of "$tool")" \
        --label "$tool" --scenario "$sc" --threads "$t" --events "$n" --warmup "$w")
      extra="bytes=$(sum_sizes "$d" 'ch_*') all_bytes=$(sum_sizes "$d" '*')"
      ;;
    *)
      line=$("$@" "$BIN/notify_bench" --tool "$(lib_of "$tool")" \
        --label "$tool" --scenario "$sc" --threads "$t" --events "$n" --warmup "$w")
      ;;
  esac
  rm -rf "$d"
  echo "$line warmup=$w $extra"
}

# --- timed runs, interleaved -------------------------------------------------
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
cpu_times() { awk '$1 == "cpu" {t = 0; for (i = 2; i <= NF; i++) t += $i; print t, $9}' /proc/stat; }
CPU_BEFORE=$(cpu_times)
say "== timing: $REPEATS repeats x {${SCENARIOS}} x {${THREADS_LIST}} threads x {${TOOLS}}, $EVENTS events/thread"
T0=$(date +%s)
tools=($TOOLS)
for ((r = 0; r < REPEATS; r++)); do
  for sc in $SCENARIOS; do
    for t in $THREADS_LIST; do
      # A new order of the tools for each round, scenario and thread count
      # (a fixed seed, so that reruns use the same orders): a rotation would
      # keep every tool behind the same one in every round, and a tool
      # whose run leaves work behind (LTTng's daemons) would then always
      # weigh on the same peer. A short pause after each run lets that
      # work end.
      seed=$((1000 * r + 10 * ${#sc} + t))
      for tool in $(printf '%s\n' "${tools[@]}" |
        awk -v s="$seed" 'BEGIN {srand(s)} {print rand() "\t" $0}' | sort -g | cut -f2); do
        echo "$(run_one "$tool" "$sc" "$t" "$EVENTS" "$WARMUP") repeat=$r" >>"$RAW"
        sleep 0.3
      done
    done
  done
  say "   repeat $((r + 1))/$REPEATS done"
done
say "== sustained rate: $LONG_REPEATS repeats x {get user} x {gaspard otf2}, 1 thread, $LONG_EVENTS events"
for ((r = 0; r < LONG_REPEATS; r++)); do
  for sc in get user; do
    for tool in gaspard otf2; do
      echo "$(run_one "$tool" "$sc" 1 "$LONG_EVENTS" "$WARMUP") repeat=$r long=1" >>"$RAW"
    done
  done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
CPU_AFTER=$(cpu_times)
STEAL=$(echo "$CPU_BEFORE $CPU_AFTER" | awk '{d = $3 - $1; printf "%.1f", (d > 0 ? 100 * ($4 - $2) / d : 0)}')
say "== timing took $(($(date +%s) - T0)) s"

# --- instruction counts --------------------------------------------------------
# Two run lengths per peer; the difference divided by the difference in events
# removes start-up and exit. --separate-threads splits the calling thread
# (thread 1: the driver runs thread 0 on its main thread) from the tool's own
# threads (gaspard's flusher).
say "== callgrind: $CG_EVENTS events differenced"
NA=$((CG_EVENTS / 2))
NB=$((CG_EVENTS / 2 * 3))
for tool in gaspard noop otf2 hotpath; do
  for sc in $SCENARIOS; do
    for n in $NA $NB; do
      run_one "$tool" "$sc" 1 "$n" 1000 valgrind --tool=callgrind --separate-threads=yes \
        --dump-instr=yes --callgrind-out-file="$CG_DIR/$tool.$sc.$n.%p" >/dev/null 2>"$WORK/vg.log" ||
        { cat "$WORK/vg.log" >&2; exit 1; }
    done
    for n in $NA $NB; do
      main=0 other=0
      for f in "$CG_DIR/$tool.$sc.$n".*-*; do
        ir=$(sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$f")
        case $f in
          *-01) main=$((main + ir)) ;;
          *) other=$((other + ir)) ;;
        esac
      done
      echo "CG label=$tool scenario=$sc events=$n main_ir=$main other_ir=$other" >>"$RAW"
    done
  done
done

# Where gaspard's instructions go (the longer runs).
PROFILE=$WORK/profile.txt
for sc in get user; do
  for f in "$CG_DIR/gaspard.$sc.$NB".*-*; do
    case $f in *-01) role=calling ;; *) role=background ;; esac
    echo "@@ $sc $role $(basename "$f")"
    callgrind_annotate --inclusive=no "$f" 2>/dev/null
  done
done >"$PROFILE"

# --- checks: every event sent is in the trace ---------------------------------
say "== checks"
CHECKS=$WORK/checks.txt
: >"$CHECKS"
CN=100000
CW=1000
for sc in get user; do
  d=$(mktemp -d "$WORK/check.XXXXXX")
  GASPARD_DIR=$d/trace "$BIN/notify_bench" --tool "$(lib_of gaspard)" --scenario "$sc" --threads 2 \
    --events $CN --warmup $CW >/dev/null
  got=$("$ROOT/target/release/gaspard" report "$d/trace" --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["events"], d["lost_events"])')
  echo "gaspard $sc sent=$((2 * (CN + CW))) init=2 trace_events=${got% *} lost=${got#* }" >>"$CHECKS"
  rm -rf "$d"
  d=$(mktemp -d "$WORK/check.XXXXXX")
  BENCH_OTF2_DIR=$d/archive "$BIN/notify_bench" --tool "$(lib_of otf2)" --scenario "$sc" --threads 2 \
    --events $CN --warmup $CW >/dev/null
  got=$(otf2-print "$d/archive/traces.otf2" | awk '$1 == "ENTER" || $1 == "LEAVE" {n++} END {print n + 0}')
  echo "otf2 $sc sent=$((2 * (CN + CW))) trace_events=$got" >>"$CHECKS"
  rm -rf "$d"
  if [ $LTTNG = 1 ]; then
    d=$(mktemp -d "$WORK/check.XXXXXX")
    lttng_session "$d/lttng" "$BIN/notify_bench" --tool "$(lib_of lttng)" --scenario "$sc" --threads 2 \
      --events $CN --warmup $CW >/dev/null
    got=$(babeltrace "$d/lttng" 2>/dev/null | grep -c 'gaspard_bench:event' || true)
    echo "lttng $sc sent=$((2 * (CN + CW))) trace_events=$got" >>"$CHECKS"
    rm -rf "$d"
  fi
done

# --- the report --------------------------------------------------------------
{
  echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
  echo "root=$ROOT"
  echo "cores=$(nproc)"
  echo "kernel=$(uname -sr)"
  echo "cc=$($CC --version | head -1)"
  echo "rustc=$(rustc --version)"
  echo "otf2=$(pkg-config --modversion otf2)"
  echo "valgrind=$(valgrind --version)"
  echo "lttng=$([ $LTTNG = 1 ] && lttng --version | head -1 || echo none)"
  echo "tsc=$(grep -qw constant_tsc /proc/cpuinfo && grep -qw nonstop_tsc /proc/cpuinfo && echo invariant || echo not-invariant)"
  echo "hypervisor=$(grep -qw hypervisor /proc/cpuinfo && (lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor:[[:space:]]*//p' | head -1 || true) || echo none)"
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  echo "load_before=$LOAD_BEFORE"
  echo "load_after=$LOAD_AFTER"
  echo "steal=$STEAL"
  echo "repeats=$REPEATS"
  echo "events=$EVENTS"
  echo "warmup=$WARMUP"
  echo "cg_a=$NA"
  echo "cg_b=$NB"
  echo "long_events=$LONG_EVENTS"
  echo "long_repeats=$LONG_REPEATS"
} >"$WORK/machine.txt"
# The raw measurements are kept, so that the report can be made again:
# python3 bench/report.py target/bench/last/{machine,raw,checks,profile}.txt
mkdir -p "$BIN/last"
cp "$WORK/machine.txt" "$RAW" "$CHECKS" "$PROFILE" "$BIN/last/"
python3 bench/report.py "$WORK/machine.txt" "$RAW" "$CHECKS" "$PROFILE" >"$OUT"
if [ "${EVENTS_ONLY:-0}" = 1 ]; then
  say "== wrote $OUT"
  exit 0
fi
say "== runtime adapters"
bash bench/adapters.sh >>"$OUT"
say "== whole programs"
bash bench/programs.sh >>"$OUT"
say "== knobs for long runs"
bash bench/knobs.sh >>"$OUT"
say "== analysis speed"
bash bench/analysis.sh >>"$OUT"
say "== analysis speed at 200 M events"
EVENTS=200000000 bash bench/analysis.sh >>"$OUT"
say "== the report read one process at a time"
bash bench/low_memory.sh >>"$OUT"
say "== exports read one process at a time"
bash bench/export_memory.sh >>"$OUT"
say "== analysis under MPI"
bash bench/mpi_analysis.sh >>"$OUT"
RAYON_NUM_THREADS=1 bash bench/mpi_analysis.sh >>"$OUT"
say "== browser view"
bash bench/view.sh >>"$OUT"
say "== wrote $OUT"
