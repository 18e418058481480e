#!/usr/bin/env bash
# Whole programs: wall time of each bundled example with gaspard recording
# (`gaspard run`, default settings) and without, in one run: REPEATS
# interleaved runs, medians. Prints a Markdown section; bench/run.sh appends
# it to BENCHMARKS.md.
#
#   bash bench/programs.sh            # REPEATS=7 by default
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-7}
BIN="$ROOT/target/bench/programs"
REL="$ROOT/target/release"
G="$REL/gaspard"
mkdir -p "$BIN"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release -q --workspace
INC="$ROOT/crates/gasp/include"
# The GASP example needs a tool: without gaspard it runs on one that records nothing.
cc -O2 -fPIC -shared -I "$INC" bench/noop_tool.c -o "$BIN/libnoop_gasp.so"
cc -O2 -pthread -I "$INC" examples/gasp/heat.c -L "$REL" -Wl,-rpath,"$REL" -lgaspard -o "$BIN/heat_gasp"
oshcc -O2 -g examples/shmem/heat.c -o "$BIN/heat_shmem"
oshcc -O2 -g examples/mgs/mgs_shmem.c -o "$BIN/mgs_shmem" -lm
mpicc -O2 -g examples/mpi/rma_halo.c -o "$BIN/rma_halo"
(cd "$BIN" && caf -O2 -g "$ROOT/examples/caf/jacobi.f90" -o "$BIN/jacobi")
clang -O2 -g -fopenmp examples/openmp/cg.c -o "$BIN/cg"
cc -O2 -g -I "$INC" examples/c/sort.c -o "$BIN/sort_plain"
"$G" cc --profile -- cc -O2 -g examples/c/sort.c -o "$BIN/sort_profiled"

SHMEM="oshrun -np 4 --oversubscribe --mca osc ^rdma"
# name | command without gaspard | command with gaspard (after `gaspard run -o DIR --`)
PROGRAMS=(
  "GASP heat (4 threads, 20000 iterations)|env LD_PRELOAD=$BIN/libnoop_gasp.so $BIN/heat_gasp 20000|$BIN/heat_gasp 20000"
  "OpenSHMEM 1-D heat (4 PEs, 3000 steps)|$SHMEM $BIN/heat_shmem 3000|$SHMEM $BIN/heat_shmem 3000"
  "OpenSHMEM MGS v3 (4 PEs, m=128)|$SHMEM $BIN/mgs_shmem 3|$SHMEM $BIN/mgs_shmem 3"
  "MPI one-sided halo (4 ranks, 3000 steps)|mpirun -np 4 --oversubscribe $BIN/rma_halo 3000|mpirun -np 4 --oversubscribe $BIN/rma_halo 3000"
  "Coarray Fortran Jacobi (4 images)|cafrun -np 4 --oversubscribe $BIN/jacobi|cafrun -np 4 --oversubscribe $BIN/jacobi"
  "OpenMP CG (2 threads, 4000 iterations)|env OMP_NUM_THREADS=2 $BIN/cg 4000|env OMP_NUM_THREADS=2 $BIN/cg 4000"
  "C sort, functions and malloc (2^20 keys)|$BIN/sort_plain 1048576|$BIN/sort_profiled 1048576"
)

load() { cut -d' ' -f1 /proc/loadavg; }
LOAD0=$(load)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
now() { date +%s%N; }
declare -A R
for rep in $(seq "$REPEATS"); do
  for i in "${!PROGRAMS[@]}"; do
    IFS='|' read -r name without with <<<"${PROGRAMS[$i]}"
    # Each round's pair in the other order than the round before, and the
    # previous trace removed before the clock starts.
    order="none gaspard"
    ((rep % 2 == 0)) && order="gaspard none"
    for which in $order; do
      rm -rf "$TMP/trace"
      t0=$(now)
      if [ "$which" = none ]; then
        (cd "$TMP" && env -u GASPARD_DIR $without >/dev/null 2>&1)
      else
        (cd "$TMP" && "$G" run -o "$TMP/trace" -- $with >/dev/null 2>&1)
      fi
      t1=$(now)
      R[$i:$which]="${R[$i:$which]:-} $(((t1 - t0) / 1000000))"
    done
  done
done
echo
echo "## Whole programs: wall time with and without gaspard"
echo
echo "Produced by \`bash bench/programs.sh\` (also run by \`bash bench/run.sh\`): $REPEATS interleaved runs"
echo "of each bundled example, medians, default settings; *with* is \`gaspard run -o DIR -- ...\`"
echo "(launch, recording, and writing the trace), *without* the same command alone. Target: at most 3 %."
echo "Runs of 4 processes share the machine's $(nproc) cores; the load average was $LOAD0 when the"
LOAD1=$(load)
if awk -v a="$LOAD0" -v b="$LOAD1" -v n="$(nproc)" 'BEGIN { exit !(a > n || b > n) }'; then
  echo "runs began and $LOAD1 when they ended (above the core count: other work shared the machine)."
else
  echo "runs began and $LOAD1 when they ended."
fi
echo
echo "The runs are paired (a run with gaspard and one without in each round, in turn first): the"
echo "interval is the mean difference of the pairs +- 1.96 standard errors, as a share of the median"
echo "without. *Within 3 %* is yes when the whole interval is at most 3 %, no when it is all above,"
echo "and unresolved (the runs spread more than the difference) otherwise."
echo
echo "| program | without (ms) | with gaspard (ms) | overhead (medians) | 95 % interval | within 3 % |"
echo "|---|---:|---:|---:|---:|---|"
for i in "${!PROGRAMS[@]}"; do
  IFS='|' read -r name _ _ <<<"${PROGRAMS[$i]}"
  python3 - "$name" "${R[$i:none]}" "${R[$i:gaspard]}" <<'PY'
import statistics as st, sys
name, a, b = sys.argv[1], list(map(float, sys.argv[2].split())), list(map(float, sys.argv[3].split()))
ma, mb = st.median(a), st.median(b)
d = [y - x for x, y in zip(a, b)]
half = 1.96 * st.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("inf")
lo, hi = (st.mean(d) - half) / ma * 100, (st.mean(d) + half) / ma * 100
verdict = "yes" if hi <= 3 else "**no**" if lo > 3 else "unresolved"
print(f"| {name} | {ma:.0f} | {mb:.0f} | {(mb - ma) / ma * 100:+.1f} % | {lo:+.1f} to {hi:+.1f} % | {verdict} |")
PY
done
echo
echo "Raw runs (ms):"
for i in "${!PROGRAMS[@]}"; do
  IFS='|' read -r name _ _ <<<"${PROGRAMS[$i]}"
  echo "- $name: without [${R[$i:none]# }], with [${R[$i:gaspard]# }]"
done
