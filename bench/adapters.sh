#!/usr/bin/env bash
# Overhead of each runtime adapter, per intercepted call: with gaspard, with a
# tool or wrapper that intercepts the same calls and records nothing, with the
# same reading the clock before and after each call (in each OMPT callback),
# and with none, in one run (REPEATS interleaved runs, medians). Prints a
# Markdown section; bench/run.sh appends it to BENCHMARKS.md.
#
#   bash bench/adapters.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-11}
COUNT=${COUNT:-200000}
BIN="$ROOT/target/bench/adapters"
LIB="$ROOT/target/release"
mkdir -p "$BIN"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_osc='^rdma'
cargo build --release -q -p gaspard-gasp
S=bench/adapters
clang -O2 -fopenmp $S/omp_barrier.c -o "$BIN/omp_barrier"
cc -O2 -fPIC -shared -I$S $S/noop_ompt.c -o "$BIN/libnoop_ompt.so"
cc -O2 -fPIC -shared -I$S -DREAD_CLOCK $S/noop_ompt.c -o "$BIN/libclock_ompt.so"
oshcc -O2 $S/shmem_put.c -o "$BIN/shmem_put"
cc -O2 -fPIC -shared -I$S $S/noop_shmem.c -o "$BIN/libnoop_shmem.so"
cc -O2 -fPIC -shared -I$S -DREAD_CLOCK $S/noop_shmem.c -o "$BIN/libclock_shmem.so"
mpicc -O2 $S/mpi_put.c -o "$BIN/mpi_put"
mpicc -O2 -fPIC -shared -I$S $S/noop_mpi.c -o "$BIN/libnoop_mpi.so"
mpicc -O2 -fPIC -shared -I$S -DREAD_CLOCK $S/noop_mpi.c -o "$BIN/libclock_mpi.so"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
run() { # adapter config -> ns per call
  local a=$1 c=$2 out
  rm -rf "$TMP/trace"
  case "$a:$c" in
    omp:none) out=$(OMP_NUM_THREADS=2 OMP_TOOL=disabled "$BIN/omp_barrier" "$COUNT") ;;
    omp:noop) out=$(OMP_NUM_THREADS=2 OMP_TOOL_LIBRARIES="$BIN/libnoop_ompt.so" "$BIN/omp_barrier" "$COUNT") ;;
    omp:clock) out=$(OMP_NUM_THREADS=2 OMP_TOOL_LIBRARIES="$BIN/libclock_ompt.so" "$BIN/omp_barrier" "$COUNT") ;;
    omp:gaspard) out=$(OMP_NUM_THREADS=2 OMP_TOOL_LIBRARIES="$LIB/libgaspard.so" GASPARD_DIR="$TMP/trace" "$BIN/omp_barrier" "$COUNT") ;;
    shmem:none) out=$(oshrun -np 2 --oversubscribe "$BIN/shmem_put" "$COUNT") ;;
    shmem:noop) out=$(oshrun -np 2 --oversubscribe -x LD_PRELOAD="$BIN/libnoop_shmem.so" "$BIN/shmem_put" "$COUNT") ;;
    shmem:clock) out=$(oshrun -np 2 --oversubscribe -x LD_PRELOAD="$BIN/libclock_shmem.so" "$BIN/shmem_put" "$COUNT") ;;
    shmem:gaspard) out=$(GASPARD_DIR="$TMP/trace" oshrun -np 2 --oversubscribe \
      -x LD_PRELOAD="$LIB/libgaspard.so:$LIB/libgaspard_shmem.so" "$BIN/shmem_put" "$COUNT") ;;
    mpi:none) out=$(mpirun -np 2 --oversubscribe "$BIN/mpi_put" "$COUNT") ;;
    mpi:noop) out=$(mpirun -np 2 --oversubscribe -x LD_PRELOAD="$BIN/libnoop_mpi.so" "$BIN/mpi_put" "$COUNT") ;;
    mpi:clock) out=$(mpirun -np 2 --oversubscribe -x LD_PRELOAD="$BIN/libclock_mpi.so" "$BIN/mpi_put" "$COUNT") ;;
    mpi:gaspard) out=$(GASPARD_DIR="$TMP/trace" mpirun -np 2 --oversubscribe \
      -x LD_PRELOAD="$LIB/libgaspard.so:$LIB/libgaspard_mpi.so" "$BIN/mpi_put" "$COUNT") ;;
  esac
  echo "$out" | tail -1
}
declare -A R
for rep in $(seq "$REPEATS"); do
  for a in omp shmem mpi; do
    # The order drawn anew per round (a fixed seed: the same runs each time).
    for c in $(printf '%s\n' none noop clock gaspard | shuf --random-source=<(yes "$rep$a")); do
      R[$a:$c]="${R[$a:$c]:-} $(run "$a" "$c")"
    done
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo
echo "## Runtime adapters: cost per intercepted call"
echo
echo "Produced by \`bash bench/adapters.sh\` (also run by \`bash bench/run.sh\`): $REPEATS interleaved runs of"
echo "$COUNT calls each, medians, 2 threads or processes. *noop* intercepts the same calls and"
echo "records nothing: an OMPT tool registering the callbacks gaspard registers, a"
echo "pshmem wrapper, a PMPI wrapper. *clock only* is the same tool or wrapper reading the clock"
echo "(the TSC, as gaspard's recorder does here) before and after each call, or in each OMPT"
echo "callback, as any tool that times them must: the floor of such a tool's cost."
echo "Target: gaspard within 1.2x of noop."
echo
echo "| adapter | call | none (ns) | noop (ns) | clock only (ns) | gaspard (ns) | clock only / noop | gaspard / noop | gaspard / clock only | within 1.2x |"
echo "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"
for a in omp shmem mpi; do
  n=$(echo "${R[$a:none]}" | median); o=$(echo "${R[$a:noop]}" | median); g=$(echo "${R[$a:gaspard]}" | median)
  ratio=$(awk -v g="$g" -v o="$o" 'BEGIN {printf "%.2f", g / o}')
  ok=$(awk -v r="$ratio" 'BEGIN {print (r <= 1.2) ? "yes" : "**no**"}')
  k=$(echo "${R[$a:clock]}" | median)
  ko=$(awk -v k="$k" -v o="$o" 'BEGIN {printf "%.2fx", k / o}')
  gk=$(awk -v g="$g" -v k="$k" 'BEGIN {printf "%.2fx", g / k}')
  case $a in
    omp) call="\`#pragma omp barrier\` (OMPT, libomp)" ;;
    shmem) call="\`shmem_putmem\` 8 bytes (oshmem)" ;;
    mpi) call="\`MPI_Put\` 8 bytes, lock_all epoch (Open MPI)" ;;
  esac
  echo "| $a | $call | $n | $o | $k | $g | $ko | ${ratio}x | $gk | $ok |"
done
echo
echo "Raw runs (ns per call): $(for k in "${!R[@]}"; do printf '%s:[%s] ' "$k" "${R[$k]# }"; done)"
