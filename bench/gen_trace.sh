# Sourced by the analysis benchmarks: builds gaspard and bench/gen_trace.c,
# and generates traces through the real recorder.
#
#   source bench/gen_trace.sh
#   build_gen_trace                          # once
#   generate_trace DIR EVENTS PROCS THREADS  # PROCS processes x THREADS threads

# Builds the release gaspard and target/bench/gen_trace (ROOT: the repository).
build_gen_trace() {
  cargo build --release -p gaspard -p gaspard-gasp >&2
  mkdir -p "$ROOT/target/bench"
  cc -O2 -pthread -rdynamic -I"$ROOT/crates/gasp/include" "$ROOT/bench/gen_trace.c" \
    -L"$ROOT/target/release" -Wl,-rpath,"$ROOT/target/release" -lgaspard \
    -o "$ROOT/target/bench/gen_trace"
}

# Records EVENTS events in all into DIR: PROCS processes of THREADS threads.
generate_trace() {
  local dir=$1 events=$2 procs=$3 threads=$4
  local per=$((events / procs / threads))
  printf '== generating %s processes x %s threads x %s events\n' "$procs" "$threads" "$per" >&2
  for ((p = 0; p < procs; p++)); do
    GASPARD_DIR=$dir "$ROOT/target/bench/gen_trace" "$p" "$procs" "$threads" "$per"
  done
}
