#!/usr/bin/env bash
# Cost of gaspard on a remote coarray read (OpenCoarrays: lock, get, unlock):
# without gaspard, with it, and with BEFORE_MPI (another build's
# libgaspard_mpi.so, e.g. copied from target/release before a change) when
# given; REPEATS interleaved runs of 2 images, medians.
#
#   REPEATS=7 BEFORE_MPI=/tmp/old/libgaspard_mpi.so bash bench/caf_get.sh
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
REPEATS=${REPEATS:-7}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cargo build --release -q -p gaspard-gasp
L="$ROOT/target/release"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
caf -O2 -g bench/caf_get.f90 -o "$TMP/caf_get"
run() { # none | gaspard | before -> ns per read
  rm -rf "$TMP/trace"
  case $1 in
    none) cafrun -np 2 --oversubscribe "$TMP/caf_get" ;;
    gaspard) GASPARD_DIR="$TMP/trace" cafrun -np 2 --oversubscribe \
      -x LD_PRELOAD="$L/libgaspard.so:$L/libgaspard_mpi.so" "$TMP/caf_get" ;;
    before) GASPARD_DIR="$TMP/trace" cafrun -np 2 --oversubscribe \
      -x LD_PRELOAD="$L/libgaspard.so:$BEFORE_MPI" "$TMP/caf_get" ;;
  esac | tail -1 | tr -d ' '
}
configs="none gaspard"
[ -n "${BEFORE_MPI:-}" ] && configs="none before gaspard"
declare -A R
for rep in $(seq "$REPEATS"); do
  for c in $configs; do R[$c]="${R[$c]:-} $(run "$c")"; done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
for c in $configs; do
  printf '%-8s median %s ns per read; runs:%s\n' "$c" "$(echo "${R[$c]}" | median)" "${R[$c]}"
done
