#!/usr/bin/env python3
"""Turns the raw output of bench/run.sh into BENCHMARKS.md (on stdout).

usage: report.py MACHINE RAW CHECKS PROFILE
"""
import re
import statistics
import sys

TARGET_RATIO = 0.75  # gaspard ns/event at most this times OTF2's
TARGET_BYTES = 4.0  # bytes/event on disk
TARGET_OFF_NS = 2.0  # ns/event with measurement off

SCEN_TEXT = {
    "get": "GASP_UPC_GET START+END",
    "user": 'user event "%d %f" START+END',
    "off": "GASP_UPC_GET, measurement off",
}


def kv(tokens):
    out = {}
    for t in tokens:
        if "=" in t:
            k, v = t.split("=", 1)
            out[k] = v
    return out


def read_machine(path):
    m = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if "=" in line:
                k, v = line.split("=", 1)
                m[k] = v
    return m


def read_raw(path):
    runs, cg = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "RESULT":
                runs.append(kv(parts[1:]))
            elif parts[0] == "CG":
                cg.append(kv(parts[1:]))
    return runs, cg


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, digits=1):
    if x is None:
        return "n/a"
    return f"{x:.{digits}f}"


def ratio(a, b, digits=2):
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.{digits}f}x"


def main():
    machine = read_machine(sys.argv[1])
    runs, cg = read_raw(sys.argv[2])
    checks = open(sys.argv[3]).read().splitlines()
    profile = open(sys.argv[4]).read()

    repeats = int(machine["repeats"])
    events = int(machine["events"])
    warmup = int(machine["warmup"])

    def sel(tool, sc, t, long=False):
        return [r for r in runs if r["label"] == tool and r["scenario"] == sc and int(r["threads"]) == t
                and (r.get("long") == "1") == long]

    def e2e_of(r):
        # The slowest thread's loop plus the final step, per event of one thread.
        slowest = max(float(x) for x in r["thread_ns"].split(","))
        return slowest + float(r["finish_ms"]) * 1e6 / int(r["events"])

    def e2e(tool, sc, t, long=False):
        return med([e2e_of(r) for r in sel(tool, sc, t, long)])

    def ns_long(tool, sc):
        return med([float(r["ns_per_event"]) for r in sel(tool, sc, 1, True)])

    def long_med(tool, sc, key, scale=1.0):
        return med([int(r[key]) * scale for r in sel(tool, sc, 1, True)])

    def ns(tool, sc, t):
        return med([float(r["ns_per_event"]) for r in sel(tool, sc, t)])

    def paired(sc, t):
        # gaspard's time over OTF2's in each round (the two runs seconds
        # apart), then the median of those ratios: a slow spell of the
        # machine weighs on both runs of a round rather than on one tool.
        by_round = {}
        for r in sel("gaspard", sc, t) + sel("otf2", sc, t):
            by_round.setdefault(r.get("repeat"), {})[r["label"]] = float(r["ns_per_event"])
        xs = [d["gaspard"] / d["otf2"] for d in by_round.values() if "gaspard" in d and d.get("otf2")]
        return med(xs)

    def spread(tool, sc, t):
        xs = [float(r["ns_per_event"]) for r in sel(tool, sc, t)]
        return (min(xs), max(xs)) if xs else (None, None)

    def sent(r):
        return int(r["threads"]) * (int(r["events"]) + int(r["warmup"]))

    def per_event(tool, sc, t, key):
        xs = [int(r[key]) / sent(r) for r in sel(tool, sc, t) if key in r]
        return med(xs)

    def finish_ms(tool, sc, t):
        return med([float(r["finish_ms"]) for r in sel(tool, sc, t)])

    def faults_per_k(tool, sc, t):
        return med([int(r["minflt"]) * 1000.0 / sent(r) for r in sel(tool, sc, t)])

    na, nb = int(machine["cg_a"]), int(machine["cg_b"])

    def ir(tool, sc, key):
        a = [c for c in cg if c["label"] == tool and c["scenario"] == sc and int(c["events"]) == na]
        b = [c for c in cg if c["label"] == tool and c["scenario"] == sc and int(c["events"]) == nb]
        if not a or not b:
            return None
        return max(0.0, (int(b[0][key]) - int(a[0][key])) / (nb - na))

    threads = sorted({int(r["threads"]) for r in runs})
    scen = ["get", "user", "off"]
    o = []
    w = o.append

    w("# Benchmarks: the cost of one GASP event")
    w("")
    w("Produced by `bash bench/run.sh` (also `make bench`), which builds everything in")
    w("release mode, runs every measurement below and writes this file. Numbers are")
    w("from one machine and one run of the script; rerun it to compare.")
    w("")
    w("## Machine")
    w("")
    w(f"- CPU: {machine['cpu']} ({machine['cores']} cores, TSC {machine['tsc']}, hypervisor: {machine['hypervisor']})")
    w(f"- Kernel: {machine['kernel']}")
    w(f"- Compilers: {machine['cc']}; {machine['rustc']}")
    w(f"- OTF2 {machine['otf2']}; {machine['valgrind']}; LTTng {machine.get('lttng', 'none')}")
    w(f"- Date: {machine['date']}; load average before the timed runs {machine['load_before']}, after {machine['load_after']};")
    w(f"  CPU time stolen by the hypervisor during the timed runs: {machine['steal']}%")
    w("")
    w("## What is measured")
    w("")
    w("`bench/notify_bench.c` loads a GASP tool library with `dlopen(RTLD_NOW | RTLD_LOCAL)`,")
    w("finds `gasp_init`, `gasp_event_notify`, `gasp_control` and `gasp_create_event` with")
    w("`dlsym`, and has each thread call `gasp_init` for its own context, send")
    w(f"{warmup:,} untimed events, meet the other threads at a barrier and then send")
    w(f"{events:,} events (START/END pairs) timed with `CLOCK_MONOTONIC`. ns/event is a thread's")
    w("wall time divided by its events, averaged over the threads of the run; each table")
    w(f"entry is the median of {repeats} runs. The runs are interleaved: every repeat runs")
    w("every peer once per scenario and thread count, in an order drawn anew for each (from a")
    w("fixed seed), with a 0.3 s pause after each run, so that no tool always runs right after")
    w("the same peer (LTTng's daemons may still be at work when its run ends).")
    w("Each run is a fresh process with a fresh trace directory under /tmp, deleted afterwards.")
    w("")
    w("Scenarios:")
    w("")
    w("- **get**: `gasp_event_notify(ctx, GASP_UPC_GET, GASP_START, \"bench.c\", 42, 7, 1, dst, pts, (size_t)8)`")
    w("  then the same with `GASP_END` (`pts` points to a 16-byte buffer). The arguments never change.")
    w("- **user**: an event made by `gasp_create_event(ctx, \"iter\", \"%d %f\")`, sent START/END with")
    w("  an `int` and a `double` that change every iteration.")
    w("- **off**: the get pairs after `gasp_control(ctx, 0)`.")
    w("")
    w("Peers:")
    w("")
    w("- **gaspard**: `target/release/libgaspard.so` (`cargo build --release -p gaspard-gasp`), with")
    w("  its defaults (1 MiB buffers, TSC clock). Each calling thread encodes its events straight")
    w("  into its buffer in the trace's compact form; a background thread checksums full buffers")
    w("  and appends them to the files. What is left is written by `gaspard_flush()` after the")
    w("  timed part (timed apart: see *Including the final step*).")
    w("- **noop**: `bench/noop_tool.c`, a GASP tool whose entry points do nothing but")
    w("  `va_start`/`va_end`: the floor cost of calling through the interface.")
    w("- **OTF2**: `bench/otf2_tool.c`, a minimal GASP tool on OTF2's event writer (the writer")
    w("  Score-P uses): one location and `OTF2_EvtWriter` per thread, START is")
    w("  `OTF2_EvtWriter_Enter` and END is `OTF2_EvtWriter_Leave` of one region per event type,")
    w("  timestamps read per event with **rdtsc** (as gaspard does), 1 MiB event chunks written by")
    w("  OTF2's flush callbacks in the recording thread when full, `OTF2_Archive_SetSerialCollectiveCallbacks`,")
    w("  pthread locking callbacks, a real archive in a temporary directory with minimal global")
    w("  definitions. The archive is closed after the timed part (timed apart, as for gaspard).")
    w("  Enter/Leave records carry no event arguments, so this peer records less than gaspard")
    w("  (which keeps every argument and the file/line/column of each call). A complete tool such")
    w("  as Score-P does more per event than this peer, which is therefore a lower bound.")
    w("  In the *off* scenario this tool only checks its own flag: no OTF2 call is made.")
    w("- **LTTng-UST**: `bench/lttng_tool.c`, a minimal GASP tool firing one LTTng-UST tracepoint")
    w("  (`bench/lttng_tp.h`: the event's tag and type, as the OTF2 peer keeps region and")
    w("  enter/leave) per START and END, with a live session per run (`lttng-sessiond`, a user-space")
    w("  channel of 8 x 4 MiB sub-buffers per CPU, `lttng start` before the program, `lttng stop`")
    w("  after it). LTTng-UST reads the clock, writes into per-CPU ring buffers shared with its")
    w("  consumer daemon, which writes them to disk in another process: that work is not in the")
    w("  calling thread's time. In discard mode, LTTng drops events when the consumer falls")
    w("  behind: the *Checks* section counts what reached the trace. Not run under callgrind.")
    w("- **gaspard hot path only** (diagnostic): `crates/gasp/csrc/gasp_shim.c` unchanged, linked with")
    w("  `crates/recorder/csrc/recorder.c` and `bench/hotpath_stub.c` instead of the Rust side:")
    w("  one pre-touched 1 MiB buffer per context, reused from its start when full; events are")
    w("  encoded as usual but no file is written and there is no flusher and no page fault. The")
    w("  gap between it and gaspard is what buffer hand-off, writing and memory traffic add.")
    w("")

    # ---- time
    w("## Time per event (ns, median)")
    w("")
    w("| scenario | threads | gaspard | noop | OTF2 | LTTng-UST | gaspard / OTF2 | gaspard / LTTng | gaspard - noop | gaspard hot path only |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for sc in scen:
        for t in threads:
            g, n, x, h = ns("gaspard", sc, t), ns("noop", sc, t), ns("otf2", sc, t), ns("hotpath", sc, t)
            lt = ns("lttng", sc, t)
            r = ratio(g, x) if sc != "off" else "n/a"
            rl = ratio(g, lt) if sc != "off" else "n/a"
            xs = fmt(x) + (" (flag check only)" if sc == "off" else "")
            ls = fmt(lt) + (" (flag check only)" if sc == "off" and lt is not None else "")
            w(f"| {SCEN_TEXT[sc]} | {t} | {fmt(g)} | {fmt(n)} | {xs} | {ls} | {r} | {rl} | {fmt(None if g is None or n is None else g - n)} | {fmt(h)} |")
    w("")
    w("Spread (min - max over the runs), ns/event:")
    w("")
    w("| scenario | threads | gaspard | noop | OTF2 | LTTng-UST | gaspard hot path only |")
    w("|---|---:|---:|---:|---:|---:|---:|")
    for sc in scen:
        for t in threads:
            cells = []
            for tool in ["gaspard", "noop", "otf2", "lttng", "hotpath"]:
                lo, hi = spread(tool, sc, t)
                cells.append(f"{fmt(lo)} - {fmt(hi)}")
            w(f"| {sc} | {t} | " + " | ".join(cells) + " |")
    w("")

    w("### Including the final step")
    w("")
    w("The timed loops leave work behind: gaspard writes what is still buffered at")
    w("`gaspard_flush()`, OTF2 writes its last chunks when the archive is closed.")
    w("Here the final step counts too: (slowest thread's loop + final step) / events per thread.")
    w("")
    w("| scenario | threads | gaspard | OTF2 | gaspard / OTF2 |")
    w("|---|---:|---:|---:|---:|")
    for sc in ["get", "user"]:
        for t in threads:
            p = paired(sc, t)
            ok = p is not None and p <= TARGET_RATIO
            w(f"| (for information) the same, median of the ratios within each round | {sc}, {t} thread(s) | {fmt(p, 2) + 'x' if p is not None else 'n/a'} | {'yes' if ok else '**no**'} |")
    for sc in ["get", "user"]:
        for t in threads:
            g, x = e2e("gaspard", sc, t), e2e("otf2", sc, t)
            w(f"| {sc} | {t} | {fmt(g)} | {fmt(x)} | {ratio(g, x)} |")
    w("")
    long_events = int(machine["long_events"])
    w("### Sustained rate")
    w("")
    w(f"{long_events:,} events in one thread (median of {machine['long_repeats']} runs), long enough for")
    w("gaspard's buffer pool (256 MiB by default) to fill if the writer thread fell behind (then")
    w("the calling thread waits for it: *waits* counts voluntary context switches).")
    w("")
    w("| scenario | gaspard | gaspard incl. flush | OTF2 | OTF2 incl. close | gaspard / OTF2 (incl.) | gaspard waits | gaspard faults/1k ev |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for sc in ["get", "user"]:
        g, x = ns_long("gaspard", sc), ns_long("otf2", sc)
        ge, xe = e2e("gaspard", sc, 1, True), e2e("otf2", sc, 1, True)
        waits = long_med("gaspard", sc, "nvcsw")
        faults = med([int(r["minflt"]) * 1000.0 / sent(r) for r in sel("gaspard", sc, 1, True)])
        w(f"| {sc} | {fmt(g)} | {fmt(ge)} | {fmt(x)} | {fmt(xe)} | {ratio(ge, xe)} | {fmt(waits, 0)} | {fmt(faults, 2)} |")
    w("")

    # ---- instructions
    w(f"## Instructions per event (callgrind, 1 thread)")
    w("")
    w(f"`valgrind --tool=callgrind --separate-threads=yes`, whole runs of {na:,} and {nb:,} events;")
    w(f"the difference in instructions divided by the {nb - na:,} events between them (start-up and")
    w("exit cancel out). User-space instructions only: the kernel's part of writing files is not")
    w("counted. *calling thread* is the thread that calls `gasp_event_notify`; gaspard's")
    w("*flusher* is its background thread (checksumming and writing chunks).")
    w("")
    w("| scenario | gaspard calling thread | gaspard flusher | gaspard total | noop | OTF2 | gaspard hot path only | gaspard total / OTF2 | gaspard calling / OTF2 |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for sc in scen:
        gm, go = ir("gaspard", sc, "main_ir"), ir("gaspard", sc, "other_ir")
        gt = None if gm is None or go is None else gm + go
        n = ir("noop", sc, "main_ir")
        xm, xo = ir("otf2", sc, "main_ir"), ir("otf2", sc, "other_ir")
        xt = None if xm is None or xo is None else xm + xo
        h = ir("hotpath", sc, "main_ir")
        w(f"| {sc} | {fmt(gm, 0)} | {fmt(go, 0)} | {fmt(gt, 0)} | {fmt(n, 0)} | {fmt(xt, 0)} | {fmt(h, 0)} | {ratio(gt, xt)} | {ratio(gm, xt)} |")
    w("")
    w("The driver's own loop (setting up the arguments and the call) is included in every")
    w("column; the noop column is mostly that.")
    w("")

    # ---- bytes
    w("## Bytes per event on disk (median)")
    w("")
    w("gaspard: the `*.gst` stream files of the trace directory; OTF2: the archive's `*.evt` files.")
    w("*whole* counts every file (manifest, definitions, anchor file). Divided by every event sent,")
    w("warm-up included.")
    w("")
    w("| scenario | threads | gaspard | gaspard whole | OTF2 | OTF2 whole | LTTng-UST (ch_* files) | gaspard / OTF2 |")
    w("|---|---:|---:|---:|---:|---:|---:|---:|")
    for sc in ["get", "user"]:
        for t in threads:
            gb, gw = per_event("gaspard", sc, t, "bytes"), per_event("gaspard", sc, t, "all_bytes")
            xb, xw = per_event("otf2", sc, t, "bytes"), per_event("otf2", sc, t, "all_bytes")
            lb = per_event("lttng", sc, t, "bytes")
            w(f"| {sc} | {t} | {fmt(gb, 2)} | {fmt(gw, 2)} | {fmt(xb, 2)} | {fmt(xw, 2)} | {fmt(lb, 2)} | {ratio(gb, xb)} |")
    w("")

    # ---- other
    w("## Page faults and closing (median)")
    w("")
    w("Page faults of the whole process from before `gasp_init` to the end of the last loop, per")
    w("1000 events sent; time of the untimed final step (`gaspard_flush()`, or closing the OTF2 archive).")
    w("")
    w("| scenario | threads | gaspard faults/1k ev | OTF2 faults/1k ev | gaspard flush (ms) | OTF2 close (ms) |")
    w("|---|---:|---:|---:|---:|---:|")
    for sc in scen:
        for t in threads:
            w(f"| {sc} | {t} | {fmt(faults_per_k('gaspard', sc, t), 2)} | {fmt(faults_per_k('otf2', sc, t), 2)} | "
              f"{fmt(finish_ms('gaspard', sc, t))} | {fmt(finish_ms('otf2', sc, t))} |")
    w("")

    # ---- targets
    w("## Targets")
    w("")
    w("| target | case | value | met |")
    w("|---|---|---:|---|")
    met_all = {"time": True, "bytes": True, "off": True}
    for sc in ["get", "user"]:
        for t in threads:
            g, x = ns("gaspard", sc, t), ns("otf2", sc, t)
            ok = g is not None and x is not None and g <= TARGET_RATIO * x
            met_all["time"] &= ok
            w(f"| ns/event at most {TARGET_RATIO}x OTF2's | {sc}, {t} thread(s) | {ratio(g, x)} | {'yes' if ok else '**no**'} |")
    for sc in ["get", "user"]:
        for t in threads:
            g, x = e2e("gaspard", sc, t), e2e("otf2", sc, t)
            ok = g is not None and x is not None and g <= TARGET_RATIO * x
            w(f"| (for information) the same, final step included | {sc}, {t} thread(s) | {ratio(g, x)} | {'yes' if ok else '**no**'} |")
    for sc in ["get", "user"]:
        g, x = e2e("gaspard", sc, 1, True), e2e("otf2", sc, 1, True)
        ok = g is not None and x is not None and g <= TARGET_RATIO * x
        w(f"| (for information) the same, sustained rate | {sc}, 1 thread | {ratio(g, x)} | {'yes' if ok else '**no**'} |")
    for sc in ["get", "user"]:
        for t in threads:
            b = per_event("gaspard", sc, t, "bytes")
            ok = b is not None and b <= TARGET_BYTES
            met_all["bytes"] &= ok
            w(f"| at most {TARGET_BYTES:g} bytes/event | {sc}, {t} thread(s) | {fmt(b, 2)} | {'yes' if ok else '**no**'} |")
    for t in threads:
        g, n = ns("gaspard", "off", t), ns("noop", "off", t)
        ok = g is not None and g <= TARGET_OFF_NS
        met_all["off"] &= ok
        w(f"| at most {TARGET_OFF_NS:g} ns/event, measurement off | {t} thread(s) (noop floor {fmt(n)}) | {fmt(g)} | {'yes' if ok else '**no**'} |")
    w("")
    names = {"time": f"time (at most {TARGET_RATIO}x OTF2)", "bytes": f"size (at most {TARGET_BYTES:g} bytes/event)",
             "off": f"measurement off (at most {TARGET_OFF_NS:g} ns/event)"}
    met = [names[k] for k, v in met_all.items() if v]
    unmet = [names[k] for k, v in met_all.items() if not v]
    w(f"Met in every case: {', '.join(met) if met else 'none'}. "
      f"Not met (in at least one case): {', '.join(unmet) if unmet else 'none'}. "
      "The rows marked *for information* are not part of the verdict.")
    floor = [ns("noop", "off", t) for t in threads]
    if any(f is not None and f > TARGET_OFF_NS for f in floor):
        w("")
        w(f"On this machine even the no-op tool takes more than {TARGET_OFF_NS:g} ns per call "
          f"({', '.join(fmt(f) for f in floor)} ns), so the measurement-off target cannot be met "
          "here as measured (a call through a function pointer with nine arguments, four on the stack); "
          "the *gaspard - noop* column gives what gaspard adds on top of that floor.")
    w("")

    # ---- checks
    w("## Checks")
    w("")
    w("Every event sent reaches the trace (2 threads, 100,000 + 1,000 events each; gaspard's trace")
    w("also holds one start-of-context event per thread; counted by `gaspard report DIR --json`,")
    w("and by `otf2-print` for the OTF2 archive):")
    w("")
    for c in checks:
        d = kv(c.split()[1:])
        tool, sc = c.split()[0], c.split()[1]
        if tool == "gaspard":
            exp = int(d["sent"]) + int(d["init"])
            ok = int(d["trace_events"]) == exp and int(d["lost"]) == 0
            w(f"- gaspard, {sc}: sent {int(d['sent']):,} (+{d['init']} start-of-context), "
              f"trace has {int(d['trace_events']):,}, lost {d['lost']}: {'OK' if ok else '**MISMATCH**'}")
        elif tool == "lttng":
            ok = int(d["trace_events"]) == int(d["sent"])
            w(f"- LTTng-UST, {sc}: sent {int(d['sent']):,}, trace has {int(d['trace_events']):,} "
              f"events (counted by babeltrace): {'OK' if ok else '**events discarded**'}")
        else:
            ok = int(d["trace_events"]) == int(d["sent"])
            w(f"- OTF2, {sc}: sent {int(d['sent']):,}, archive has {int(d['trace_events']):,} "
              f"Enter/Leave records: {'OK' if ok else '**MISMATCH**'}")
    w("")

    # ---- profile
    w("## Where gaspard's instructions go (1 thread)")
    w("")
    w(f"`callgrind_annotate --inclusive=no` of the {nb:,}-event callgrind runs (outputs kept in")
    w("`target/bench/callgrind/`, recorded with `--dump-instr=yes` for `callgrind_annotate --auto=yes`")
    w("or KCachegrind), in instructions per event sent (start-up included, so small entries are")
    w("slightly inflated). Code inlined from another file is listed under that file.")
    w("")
    sent_cg = nb + 1000
    for block in profile.split("@@ ")[1:]:
        head, _, body = block.partition("\n")
        sc, role = head.split()[0], head.split()[1]
        w(f"{sc}, {'calling thread' if role == 'calling' else 'flusher thread'}:")
        w("")
        w("| Ir/event | share | file:function |")
        w("|---:|---:|---|")
        rows = 0
        in_fn = False
        for line in body.splitlines():
            if line.strip().endswith("file:function"):
                in_fn = True
                continue
            if not in_fn:
                continue
            if line.startswith("-----") and rows:
                break
            m = re.match(r"^\s*([\d,]+)\s+\(\s*([\d.]+)%\)\s+(.*)$", line)
            if not m:
                continue
            irv = int(m.group(1).replace(",", ""))
            share = float(m.group(2))
            if share < 1.0 or rows >= 12:
                continue
            where = re.sub(r"\s*\[[^\]]*\]\s*$", "", m.group(3))
            where = where.replace(machine.get("root", "/work/main") + "/", "")
            where = re.sub(r"/rustc/[0-9a-f]+/", "rustc:", where)
            where = where.replace("|", "\\|")
            w(f"| {irv / sent_cg:.1f} | {share:.1f}% | `{where}` |")
            rows += 1
        w("")
    sys.stdout.write("\n".join(o) + "\n")


if __name__ == "__main__":
    main()
