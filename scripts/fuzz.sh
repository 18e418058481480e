#!/usr/bin/env bash
# Runs every fuzz target of fuzz/ for SECONDS seconds each (default 60), from
# the seed corpus in fuzz/corpus/TARGET; fails on the first panic, hang
# (10 s on one input), overflow or out-of-memory, leaving the input that did
# it in fuzz/artifacts/TARGET/. cargo-fuzz is installed when missing.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-60}
shift || true
# cargo-fuzz passes unstable compiler flags (sanitizer coverage); the stable
# compiler accepts them with RUSTC_BOOTSTRAP.
export RUSTC_BOOTSTRAP=1
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
targets=("$@")
[ ${#targets[@]} -gt 0 ] || mapfile -t targets < <(cargo fuzz list)
# The format crate has no unsafe code: no sanitizer is needed to find its
# panics, and without one builds and runs are faster. Debug assertions (-a,
# and fuzz/Cargo.toml's profile) make arithmetic overflow a crash.
opts=(-a -s none)
cargo fuzz build "${opts[@]}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
  echo "== fuzz target $t: $secs s"
  mkdir -p "$work/$t"
  if ! cargo fuzz run "${opts[@]}" "$t" "$work/$t" "corpus/$t" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 2>"$work/$t.log"; then
    tail -n 40 "$work/$t.log" >&2
    echo "fuzz target $t failed; the input is in fuzz/artifacts/$t/" >&2
    exit 1
  fi
  grep -E '^stat::number_of_executed_units|^Done' "$work/$t.log" || true
done
echo "fuzzing: ${#targets[@]} targets, $secs s each, no crash"
