#!/usr/bin/env bash
# Installs gaspard into a temporary prefix, builds the bundled example the way
# a user would (pkg-config), runs it, and checks the report of its trace.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
make --no-print-directory install PREFIX="$tmp/prefix" >/dev/null
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
cc -O2 -pthread examples/gasp/heat.c $(pkg-config --cflags --libs gaspard) -o "$tmp/heat"
"$tmp/prefix/bin/gaspard" run -o "$tmp/trace" -- "$tmp/heat" 20 >/dev/null 2>&1
"$tmp/prefix/bin/gaspard" report "$tmp/trace" --json >"$tmp/report.json"
python3 - "$tmp/report.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
by = {e["name"]: e for e in r["by_event"]}
problems = []
if r["threads"] != 4: problems.append(f"threads {r['threads']} != 4")
if by.get("GASP_UPC_GET", {}).get("count") != 2 * 3 * 20: problems.append(f"GET count {by.get('GASP_UPC_GET')}")
if by.get("iteration", {}).get("count") != 4 * 20: problems.append(f"iteration count {by.get('iteration')}")
if r["lost_events"] != 0: problems.append("events were lost")
if problems:
    print("install check failed: " + "; ".join(problems)); sys.exit(1)
print("install check: the installed headers, library, pkg-config file and command work together")
PY
