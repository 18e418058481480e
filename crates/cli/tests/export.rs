//! `gaspard export`: real MPI and OpenSHMEM programs are recorded, exported
//! to OTF2, Perfetto and Parquet, and each output is read back by another
//! reader (libotf2's reader, `protoc --decode` with Perfetto's schema,
//! DuckDB) and compared with `gaspard dump --json` and `gaspard report --json`
//! of the same trace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{dump, events, report};

const MPI_PROGRAM: &str = r#"
#include <mpi.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  int right = (me + 1) % n, left = (me + n - 1) % n;
  double x[64] = {0};
  for (int i = 0; i < 3; i++) {
    if (me == 0) {
      MPI_Send(x, 64, MPI_DOUBLE, right, 5, MPI_COMM_WORLD);
      MPI_Recv(x, 64, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else {
      MPI_Recv(x, 64, MPI_DOUBLE, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(x, 64, MPI_DOUBLE, right, 5, MPI_COMM_WORLD);
    }
  }
  /* Non-blocking: completed by MPI_Waitall, then by MPI_Wait (a receive
     from any source, learning it from the status). */
  MPI_Request rq[2];
  MPI_Irecv(x + 16, 8, MPI_DOUBLE, left, 11, MPI_COMM_WORLD, &rq[0]);
  MPI_Isend(x, 8, MPI_DOUBLE, right, 11, MPI_COMM_WORLD, &rq[1]);
  MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
  MPI_Irecv(x + 16, 4, MPI_DOUBLE, MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &rq[0]);
  MPI_Isend(x, 4, MPI_DOUBLE, right, 12, MPI_COMM_WORLD, &rq[1]);
  MPI_Wait(&rq[1], MPI_STATUS_IGNORE);
  MPI_Status st;
  MPI_Wait(&rq[0], &st);
  MPI_Sendrecv(x, 8, MPI_DOUBLE, right, 9, x + 32, 8, MPI_DOUBLE, left, 9,
               MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Bcast(x, 4, MPI_DOUBLE, 1, MPI_COMM_WORLD);
  long *base; MPI_Win win;
  MPI_Win_allocate(16 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
  MPI_Win_fence(0, win);
  long v = me, g[2];
  MPI_Put(&v, 1, MPI_LONG, right, me, 1, MPI_LONG, win);
  MPI_Get(g, 2, MPI_LONG, left, 4, 2, MPI_LONG, win);
  MPI_Win_fence(0, win);
  MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
  long one = 1, old;
  MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 7, MPI_SUM, win);
  MPI_Accumulate(&one, 1, MPI_LONG, 0, 8, 1, MPI_LONG, MPI_SUM, win);
  MPI_Win_unlock(0, win);
  MPI_Win_free(&win);
  double s = me, t;
  MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return t == n * (n - 1) / 2 ? 0 : 3;
}
"#;

const SHMEM_PROGRAM: &str = r#"
#include <shmem.h>
int main(void) {
  shmem_init();
  int me = shmem_my_pe(), n = shmem_n_pes();
  long *a = shmem_malloc(64 * sizeof(long));
  int *ctr = shmem_malloc(sizeof(int));
  for (int i = 0; i < 64; i++) a[i] = me;
  *ctr = 0;
  shmem_barrier_all();
  long buf[8] = {me};
  shmem_putmem(a + 8, buf, sizeof buf, (me + 1) % n);
  shmem_long_put(a + 16, buf, 4, (me + 1) % n);
  shmem_barrier_all();
  long got[4];
  shmem_getmem(got, a, sizeof got, (me + n - 1) % n);
  shmem_long_p(a + 32, me, 0);
  shmem_int_atomic_fetch_add(ctr, 1, 0);
  shmem_int_atomic_inc(ctr, 0);
  shmem_barrier_all();
  int ok = me != 0 || *ctr == 2 * n;
  shmem_free(a);
  shmem_free(ctr);
  shmem_finalize();
  return ok ? 0 : 3;
}
"#;

/// What each kind of these programs becomes in OTF2 (the mapping the
/// exporter documents), written out kind by kind.
fn otf2_record(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "GASP_MPI_SEND" => "MpiSend",
        "GASP_MPI_RECV" => "MpiRecv",
        "GASP_MPI_SENDRECV" => "MpiSendRecv",
        "GASP_MPI_ISEND" => "MpiIsend",
        "GASP_MPI_WIN_ALLOCATE" => "WinMade",
        "GASP_MPI_WIN_FREE" => "WinFree",
        "GASP_MPI_WIN_FENCE" => "Fence",
        "GASP_MPI_WIN_LOCK" => "Lock",
        "GASP_MPI_WIN_UNLOCK" => "Unlock",
        "GASP_MPI_IRECV" => "MpiIrecv",
        "GASP_MPI_BARRIER" | "GASP_MPI_BCAST" | "GASP_MPI_ALLREDUCE" => "Collective",
        "GASP_SHMEM_BARRIER_ALL" => "Collective",
        "GASP_MPI_PUT" | "GASP_MPI_ACCUMULATE" => "RmaPut",
        "GASP_SHMEM_PUTMEM" | "GASP_SHMEM_LONG_PUT" | "GASP_SHMEM_LONG_P" => "RmaPut",
        "GASP_MPI_GET" | "GASP_SHMEM_GETMEM" => "RmaGet",
        "GASP_MPI_FETCH_AND_OP"
        | "GASP_SHMEM_INT_ATOMIC_FETCH_ADD"
        | "GASP_SHMEM_INT_ATOMIC_INC" => "RmaAtomic",
        _ => return None,
    })
}

fn gaspard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .args(args)
        .output()
        .unwrap()
}

/// `gaspard export TRACE --format FORMAT -o OUT` and `more`, as it ended.
fn export_run(trace: &Path, format: &str, out: &Path, more: &[&str]) -> std::process::Output {
    let mut args = vec![
        "export",
        trace.to_str().unwrap(),
        "--format",
        format,
        "-o",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    gaspard(&args)
}

fn export(trace: &Path, format: &str, out: &Path) -> String {
    // Read whole: compared below with the reading one process at a time.
    let o = export_run(trace, format, out, &["--in-memory"]);
    assert!(
        o.status.success(),
        "export {format}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Counts of the trace, from `gaspard dump --json`.
#[derive(Default, Debug)]
struct Expected {
    threads: usize,
    starts: u64,
    ends: u64,
    atomics: u64,
    /// START + ATOMIC events per kind.
    entered: BTreeMap<String, u64>,
    /// Per OTF2 record: count and bytes.
    records: BTreeMap<&'static str, (u64, u64)>,
    kinds: BTreeSet<String>,
}

fn expected(d: &Value) -> Expected {
    let mut x = Expected::default();
    let threads = events(d);
    x.threads = threads.len();
    for evs in &threads {
        for e in evs {
            // A user event is named by its name, as in the report.
            let kind = e["name"]
                .as_str()
                .or(e["kind"].as_str())
                .unwrap()
                .to_string();
            x.kinds.insert(kind.clone());
            let phase = e["phase"].as_str().unwrap();
            match phase {
                "START" => x.starts += 1,
                "END" => x.ends += 1,
                _ => x.atomics += 1,
            }
            if phase != "END" {
                *x.entered.entry(kind.clone()).or_default() += 1;
            }
            let nbytes = |name: &str| e["args"][name].as_u64().unwrap_or(0);
            let mut add = |r: &'static str, bytes: u64| {
                let c = x.records.entry(r).or_default();
                c.0 += 1;
                c.1 += bytes;
            };
            match (otf2_record(&kind), phase) {
                (Some("MpiSend"), "START") => add("MpiSend", nbytes("nbytes")),
                (Some("MpiRecv"), "END") => add("MpiRecv", nbytes("nbytes")),
                (Some("MpiSendRecv"), "START") => {
                    add("MpiSend", nbytes("nbytes"));
                    add("MpiRecv", nbytes("recv_nbytes"));
                }
                (Some("MpiIsend"), "START") => {
                    add("MpiIsend", nbytes("nbytes"));
                    add("MpiIsendComplete", 0);
                }
                (Some("MpiIrecv"), "START") => {
                    add("MpiIrecvRequest", 0);
                    add("MpiIrecv", nbytes("nbytes"));
                }
                (Some("WinMade"), "END") => add("RmaWinCreate", 0),
                (Some("WinFree"), "START") => add("RmaWinDestroy", 0),
                (Some("Fence"), "START") => add("RmaCollectiveBegin", 0),
                (Some("Fence"), "END") => add("RmaCollectiveEnd", 0),
                (Some("Lock"), "START") => add("RmaRequestLock", 0),
                (Some("Lock"), "END") => add("RmaAcquireLock", 0),
                (Some("Unlock"), "END") => add("RmaReleaseLock", 0),
                (Some("Collective"), "START") => add("MpiCollectiveBegin", 0),
                (Some("Collective"), "END") => add("MpiCollectiveEnd", 0),
                (Some(r @ ("RmaPut" | "RmaGet" | "RmaAtomic")), "START") => {
                    add(r, nbytes("nbytes"));
                    add("RmaOpCompleteBlocking", 0);
                }
                _ => {}
            }
        }
    }
    x
}

/// The OTF2 record types other than Enter/Leave that the export writes.
const RECORDS: [&str; 19] = [
    "MpiSend",
    "MpiRecv",
    "MpiCollectiveBegin",
    "MpiCollectiveEnd",
    "RmaPut",
    "RmaGet",
    "RmaAtomic",
    "RmaOpCompleteBlocking",
    "MpiIsend",
    "MpiIsendComplete",
    "MpiIrecvRequest",
    "MpiIrecv",
    "RmaWinCreate",
    "RmaWinDestroy",
    "RmaCollectiveBegin",
    "RmaCollectiveEnd",
    "RmaRequestLock",
    "RmaAcquireLock",
    "RmaReleaseLock",
];

/// `otf2_count` (tests/export/otf2_count.c, linked to libotf2) built once per test.
fn otf2_counts(dir: &Path, archive: &Path) -> BTreeMap<String, u64> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/export/otf2_count.c");
    let exe = dir.join("otf2_count");
    let o = Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-lopen-trace-format2")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "building otf2_count: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = Command::new(&exe)
        .arg(archive.join("traces.otf2"))
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "otf2_count: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let (k, v) = line.rsplit_once(' ').unwrap();
        m.insert(k.to_string(), v.parse().unwrap());
    }
    m
}

fn check_otf2(dir: &Path, trace: &Path, x: &Expected, windows: u64) {
    let out = dir.join("out.otf2");
    export(trace, "otf2", &out);
    // otf2-print reads it without a warning.
    let p = Command::new("otf2-print")
        .arg(out.join("traces.otf2"))
        .output()
        .expect("otf2-print (Debian: otf2-tools)");
    assert!(p.status.success(), "otf2-print failed");
    assert!(
        p.stderr.is_empty(),
        "otf2-print: {}",
        String::from_utf8_lossy(&p.stderr)
    );
    let c = otf2_counts(dir, &out);
    assert_eq!(c["locations"], x.threads as u64);
    assert_eq!(c["comms"], u64::from(!x.records.is_empty() || windows > 0));
    assert_eq!(c["windows"], windows);
    assert_eq!(c["backwards"], 0);
    assert_eq!(c["misnested"], 0);
    assert_eq!(c["open"], 0);
    assert_eq!(c["bad_requests"], 0);
    assert_eq!(c["open_requests"], 0);
    assert_eq!(c["unopened_window_use"], 0);
    assert_eq!(c["Enter"], x.starts + x.atomics);
    assert_eq!(c["Leave"], x.ends + x.atomics);
    for r in RECORDS {
        let (n, bytes) = x.records.get(r).copied().unwrap_or_default();
        assert_eq!(c[r], n, "{r}");
        if let Some(&b) = c.get(&format!("bytes {r}")) {
            assert_eq!(b, bytes, "bytes of {r}");
        }
    }
    for (kind, n) in &x.entered {
        assert_eq!(c.get(&format!("enter {kind}")), Some(n), "Enter {kind}");
    }
    let events: u64 = c["Enter"] + c["Leave"] + RECORDS.iter().map(|r| c[*r]).sum::<u64>();
    assert_eq!(c["events"], events, "records of other types were written");
    // Read one process at a time, the same archive: every event and every
    // definition as otf2-print prints them.
    let low = dir.join("out-low-memory.otf2");
    let o = export_run(trace, "otf2", &low, &["--low-memory"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for args in [&[][..], &["-G"][..]] {
        let print = |archive: &Path| {
            let p = Command::new("otf2-print")
                .args(args)
                .arg(archive.join("traces.otf2"))
                .output()
                .unwrap();
            assert!(
                p.status.success() && p.stderr.is_empty(),
                "otf2-print {args:?}"
            );
            String::from_utf8(p.stdout).unwrap()
        };
        let (whole, by_process) = (print(&out), print(&low));
        assert!(whole.lines().count() > 10, "{whole}");
        assert_eq!(whole, by_process, "otf2-print {args:?}");
    }
}

/// The packets of a Perfetto trace decoded by `protoc`, as text, one per entry.
fn perfetto_packets(file: &Path) -> Vec<String> {
    let schema_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/export");
    let o = Command::new("protoc")
        .arg("-I")
        .arg(&schema_dir)
        .arg("--decode=perfetto.protos.Trace")
        .arg("perfetto_trace.proto")
        .stdin(std::fs::File::open(file).unwrap())
        .output()
        .expect("protoc (Debian: protobuf-compiler)");
    assert!(
        o.status.success(),
        "protoc: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8(o.stdout).unwrap();
    text.split("packet {\n")
        .filter(|p| !p.trim().is_empty())
        .map(str::to_string)
        .collect()
}

fn field<'a>(packet: &'a str, name: &str) -> Vec<&'a str> {
    packet
        .lines()
        .filter_map(|l| l.trim().strip_prefix(name))
        .filter_map(|v| v.strip_prefix(": "))
        .collect()
}

/// Checks the Perfetto export; returns, per slice name, the flows ending there.
fn check_perfetto(
    dir: &Path,
    trace: &Path,
    x: &Expected,
    messages: u64,
    who: &str,
) -> BTreeMap<String, usize> {
    let out = dir.join("out.pftrace");
    export(trace, "perfetto", &out);
    // Read one process at a time (its names, tracks and flows gathered
    // first), the same trace, byte for byte: asked for, and chosen by
    // itself for a trace bigger than the memory it may use.
    let whole = std::fs::read(&out).unwrap();
    assert!(whole.len() > 100);
    let low = dir.join("low-memory.pftrace");
    let o = export_run(trace, "perfetto", &low, &["--low-memory"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        whole == std::fs::read(&low).unwrap(),
        "the Perfetto trace written process by process differs"
    );
    let small = dir.join("small-memory.pftrace");
    let o = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .args([
            "export",
            trace.to_str().unwrap(),
            "--format",
            "perfetto",
            "-o",
        ])
        .arg(&small)
        .env("GASPARD_MEMORY", "1000")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("read one process at a time"), "{err}");
    assert!(whole == std::fs::read(&small).unwrap());
    // In directories not made yet: the export makes them, and writes the same.
    let nested = dir.join("perfetto/of").join(who.to_string() + ".pftrace");
    export(trace, "perfetto", &nested);
    assert_eq!(
        std::fs::read(&nested).unwrap(),
        std::fs::read(&out).unwrap()
    );
    // Under a file: refused with the reason, before the trace is read.
    let under_file = out.join("inside.pftrace");
    let o = export_run(trace, "perfetto", &under_file, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("cannot create"),
        "{err}"
    );
    let packets = perfetto_packets(&out);
    // Interned names: every kind of the trace.
    let names: BTreeSet<String> = field(&packets[0], "name")
        .iter()
        .map(|n| n.trim_matches('"').to_string())
        .collect();
    for k in &x.kinds {
        assert!(names.contains(k), "{k} not among the event names");
    }
    let thread_names: BTreeSet<&str> = packets
        .iter()
        .flat_map(|p| field(p, "thread_name"))
        .collect();
    let want: BTreeSet<String> = (0..x.threads).map(|i| format!("\"{who} {i}\"")).collect();
    assert_eq!(
        thread_names,
        want.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    let count = |ty: &str| {
        packets
            .iter()
            .filter(|p| field(p, "type").contains(&ty))
            .count() as u64
    };
    let rma: u64 = ["RmaPut", "RmaGet", "RmaAtomic"]
        .iter()
        .map(|r| x.records.get(r).map_or(0, |c| c.0))
        .sum();
    assert_eq!(count("TYPE_SLICE_BEGIN"), x.starts);
    assert_eq!(count("TYPE_SLICE_END"), x.ends);
    assert_eq!(count("TYPE_INSTANT"), x.atomics + rma);
    assert_eq!(
        packets
            .iter()
            .flat_map(|p| field(p, "name_iid"))
            .filter(|_| true)
            .count() as u64,
        x.starts + x.atomics + rma
    );
    // Every slice has its source line, interned once.
    // (protoc prints event_names, field 2, before source_locations, field 4.)
    let at = packets[0].find("source_locations {").unwrap();
    let interned: BTreeSet<&str> = field(&packets[0][at..], "iid").into_iter().collect();
    assert!(field(&packets[0], "file_name")
        .iter()
        .any(|f| f.ends_with("prog.c\"")));
    let begins: Vec<&String> = packets
        .iter()
        .filter(|p| field(p, "type").contains(&"TYPE_SLICE_BEGIN"))
        .collect();
    for p in &begins {
        let iid = field(p, "source_location_iid");
        assert_eq!(iid.len(), 1, "{p}");
        assert!(interned.contains(iid[0]));
    }
    // Flows: each message and each one-sided access, leaving one slice and
    // ending at another.
    let from: BTreeSet<&str> = packets.iter().flat_map(|p| field(p, "flow_ids")).collect();
    let to: BTreeSet<&str> = packets
        .iter()
        .flat_map(|p| field(p, "terminating_flow_ids"))
        .collect();
    assert_eq!(from.len() as u64, messages + rma);
    assert_eq!(from, to);
    // The remote instants are on the targets' tracks, named by the access.
    let remote = packets
        .iter()
        .filter(|p| field(p, "type").contains(&"TYPE_INSTANT"))
        .filter(|p| !field(p, "terminating_flow_ids").is_empty())
        .count() as u64;
    assert_eq!(remote, rma);
    // Slice names by interned id (event_names come first in the packet).
    let interned_names = &packets[0][..at];
    let by_iid: BTreeMap<&str, &str> = field(interned_names, "iid")
        .into_iter()
        .zip(field(interned_names, "name"))
        .collect();
    let mut ending = BTreeMap::new();
    for p in &begins {
        let n = field(p, "terminating_flow_ids").len();
        if n > 0 {
            let name = by_iid[field(p, "name_iid")[0]].trim_matches('"');
            *ending.entry(name.to_string()).or_default() += n;
        }
    }
    ending
}

/// DuckDB's answers on the Parquet tables (tests/export/query.py).
fn parquet_query(dir: &Path, trace: &Path) -> Value {
    let out = dir.join("tables");
    export(trace, "parquet", &out);
    // Read one process at a time, the same tables, byte for byte.
    let low = dir.join("tables-low-memory");
    let o = export_run(trace, "parquet", &low, &["--low-memory"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in ["events.parquet", "communication.parquet"] {
        let (a, b) = (
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(low.join(f)).unwrap(),
        );
        assert!(a.len() > 100, "{f}");
        assert!(a == b, "{f}: the tables written process by process differ");
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/export/query.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the DuckDB queries failed (pip install duckdb): {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

fn check_parquet(dir: &Path, trace: &Path, x: &Expected) -> Value {
    let q = parquet_query(dir, trace);
    let r = report(trace);
    assert_eq!(q["events"], r["events"]);
    assert_eq!(q["events"].as_u64().unwrap(), x.starts + x.ends + x.atomics);
    assert_eq!(q["unmatched"], 0);
    assert_eq!(q["per_thread"].as_array().unwrap().len(), x.threads);
    // Count and time per event, as the report's profile has them.
    let by_event: BTreeMap<String, (u64, u64)> = q["by_event"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                (row[1].as_u64().unwrap(), row[2].as_u64().unwrap()),
            )
        })
        .collect();
    let reported: BTreeMap<String, (u64, u64)> = r["by_event"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                (
                    e["count"].as_u64().unwrap(),
                    e["total_ns"].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(by_event, reported);
    // Per callsite.
    let by_site: BTreeSet<(String, u64, String, u64, u64)> = q["by_callsite"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row[0].as_str().unwrap().to_string(),
                row[1].as_u64().unwrap(),
                row[2].as_str().unwrap().to_string(),
                row[3].as_u64().unwrap(),
                row[4].as_u64().unwrap(),
            )
        })
        .collect();
    let reported: BTreeSet<(String, u64, String, u64, u64)> = r["by_callsite"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["file"].is_string() && e["total_ns"].as_u64().unwrap() > 0)
        .map(|e| {
            (
                e["file"].as_str().unwrap().to_string(),
                e["line"].as_u64().unwrap(),
                e["name"].as_str().unwrap().to_string(),
                e["count"].as_u64().unwrap(),
                e["total_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    assert!(!reported.is_empty());
    assert!(
        reported.is_subset(&by_site),
        "report: {reported:?}\nSQL: {by_site:?}"
    );
    // Who talks to whom: the report's communication matrices, cell by cell.
    let mut cells = BTreeMap::new();
    for m in r["communication"].as_array().unwrap() {
        let n = m["ranks"].as_u64().unwrap() as usize;
        for i in 0..n {
            for j in 0..n {
                let ops = m["ops"][i][j].as_u64().unwrap();
                if ops > 0 {
                    cells.insert(
                        (m["model"].as_str().unwrap().to_string(), i as u64, j as u64),
                        (
                            ops,
                            m["bytes"][i][j].as_u64().unwrap(),
                            m["time_ns"][i][j].as_u64().unwrap(),
                        ),
                    );
                }
            }
        }
    }
    assert!(!cells.is_empty());
    let sql: BTreeMap<(String, u64, u64), (u64, u64, u64)> = q["matrix"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                (
                    row[0].as_str().unwrap().to_string(),
                    row[1].as_u64().unwrap(),
                    row[2].as_u64().unwrap(),
                ),
                (
                    row[3].as_u64().unwrap(),
                    row[4].as_u64().unwrap(),
                    row[5].as_u64().unwrap(),
                ),
            )
        })
        .collect();
    assert_eq!(sql, cells);
    assert_eq!(q["comm_dst_known"][0], 0, "every target thread is known");
    q
}

fn check_refusals(dir: &Path, trace: &Path) {
    // An existing output is kept without --force, replaced with it.
    let out = dir.join("out.pftrace");
    let before = std::fs::read(&out).unwrap();
    std::fs::write(&out, b"keep me").unwrap();
    let o = export_run(trace, "perfetto", &out, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("already exists") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");
    let o = export_run(trace, "perfetto", &out, &["--force"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap().len(), before.len());
    // Never the trace itself, nor a directory holding it, even with --force.
    for o in [trace.to_path_buf(), trace.parent().unwrap().to_path_buf()] {
        let r = export_run(trace, "parquet", &o, &["--force"]);
        assert!(!r.status.success());
        assert!(
            String::from_utf8_lossy(&r.stderr).contains("holds the trace"),
            "{}",
            String::from_utf8_lossy(&r.stderr)
        );
    }
    assert!(report(trace)["events"].as_u64().unwrap() > 0);
}

#[test]
fn mpi_trace_exports_to_otf2_perfetto_and_parquet() {
    let dir = common::tmpdir("export-mpi");
    let exe = common::compile_with(&dir, "mpicc", "prog.c", MPI_PROGRAM);
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "mpirun",
            "-np",
            "3",
            "--oversubscribe",
            exe.to_str().unwrap(),
        ],
    );
    let x = expected(&dump(&trace));
    assert_eq!(x.threads, 3);
    assert_eq!(x.starts, x.ends);
    // 3 ranks: 3 rounds of a ring and a Sendrecv.
    assert_eq!(x.records["MpiSend"], (12, 3 * 3 * 512 + 3 * 64));
    assert_eq!(x.records["RmaAtomic"].0, 3);
    check_otf2(&dir, &trace, &x, 1);
    assert_eq!(x.records["MpiIsend"], (6, 3 * (64 + 32)));
    assert_eq!(x.records["RmaCollectiveEnd"].0, 6);
    assert_eq!(x.records["RmaAcquireLock"].0, 3);
    // Every send, blocking or not, is matched to its receive.
    let ending = check_perfetto(&dir, &trace, &x, 12 + 6, "rank");
    // Blocking receives end their flows; a non-blocking one's flow ends at
    // the wait that completed it; one-sided accesses end at instants.
    assert_eq!(ending.get("GASP_MPI_RECV"), Some(&9));
    assert_eq!(ending.get("GASP_MPI_SENDRECV"), Some(&3));
    assert_eq!(ending.get("GASP_MPI_WAITALL"), Some(&3));
    assert_eq!(ending.get("GASP_MPI_WAIT"), Some(&3));
    assert_eq!(ending.get("GASP_MPI_IRECV"), None);
    let q = check_parquet(&dir, &trace, &x);
    // The one window, and where each access went in it (displacements in
    // longs: puts at `me`, gets at 4, the fetch-and-op at 7, accumulate at 8).
    let objects = q["objects"].as_array().unwrap();
    let row = |kind: &str| {
        objects
            .iter()
            .find(|r| r[1] == kind)
            .unwrap_or_else(|| panic!("{kind} in {objects:?}"))
    };
    assert!(row("GASP_MPI_PUT")[0]
        .as_str()
        .unwrap()
        .starts_with("prog.c:"));
    assert_eq!(row("GASP_MPI_PUT")[2], 3);
    assert_eq!(row("GASP_MPI_PUT")[4], 0);
    assert_eq!(row("GASP_MPI_PUT")[5], 16);
    assert_eq!(row("GASP_MPI_GET")[3], 3 * 16);
    assert_eq!(row("GASP_MPI_GET")[4], 32);
    assert_eq!(row("GASP_MPI_FETCH_AND_OP")[4], 56);
    assert_eq!(row("GASP_MPI_ACCUMULATE")[4], 64);
    check_refusals(&dir, &trace);
}

#[test]
fn shmem_trace_exports_to_otf2_perfetto_and_parquet() {
    let dir = common::tmpdir("export-shmem");
    let exe = common::compile_with(&dir, "oshcc", "prog.c", SHMEM_PROGRAM);
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "oshrun",
            "-np",
            "3",
            "--oversubscribe",
            "--mca",
            "osc",
            "^rdma",
            exe.to_str().unwrap(),
        ],
    );
    let x = expected(&dump(&trace));
    assert_eq!(x.threads, 3);
    assert_eq!(x.starts, x.ends);
    assert_eq!(x.records["RmaPut"], (9, 3 * (64 + 32 + 8)));
    assert_eq!(x.records["RmaGet"], (3, 3 * 32));
    assert_eq!(x.records["RmaAtomic"].0, 6);
    check_otf2(&dir, &trace, &x, 2);
    assert!(check_perfetto(&dir, &trace, &x, 0, "PE").is_empty());
    let q = check_parquet(&dir, &trace, &x);
    // Offsets in the symmetric allocation `a` (longs): putmem at 8, long_put
    // at 16, long_p at 32, getmem at 0; the atomics on `ctr`.
    let objects = q["objects"].as_array().unwrap();
    let row = |kind: &str| {
        objects
            .iter()
            .find(|r| r[1] == kind)
            .unwrap_or_else(|| panic!("{kind} in {objects:?}"))
    };
    assert_eq!(row("GASP_SHMEM_PUTMEM")[4], 64);
    assert_eq!(row("GASP_SHMEM_LONG_PUT")[4], 128);
    assert_eq!(row("GASP_SHMEM_LONG_P")[4], 256);
    assert_eq!(row("GASP_SHMEM_GETMEM")[4], 0);
    assert_eq!(row("GASP_SHMEM_INT_ATOMIC_INC")[4], 0);
    assert_ne!(
        row("GASP_SHMEM_INT_ATOMIC_INC")[0],
        row("GASP_SHMEM_PUTMEM")[0]
    );
    check_refusals(&dir, &trace);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = common::tmpdir("export-bad");
    let out = dir.join("out");
    for (trace, want) in [
        (dir.join("missing"), "does not exist"),
        (dir.clone(), "no gaspard trace"),
    ] {
        let o = export_run(&trace, "otf2", &out, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success());
        assert!(err.contains(want), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let o = export_run(&dir, "csv", &out, &[]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("otf2, perfetto, parquet"));
    assert!(!out.exists());
}

/// A GASP program (examples/gasp/heat.c, 4 UPC-like threads in one
/// process): no ranks, so regions only; and its profile-only run, which has
/// no events to export.
#[test]
fn gasp_program_exports_regions_and_profile_only_is_refused() {
    let dir = common::tmpdir("export-gasp");
    let exe = common::compile_heat(&dir);
    for (name, profile_only) in [("full", false), ("prof", true)] {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gaspard"));
        c.arg("run").arg("-o").arg(dir.join(name));
        if profile_only {
            c.arg("--profile-only");
        }
        let o = c.arg("--").arg(&exe).arg("20").output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let trace = dir.join("full");
    let x = expected(&dump(&trace));
    assert_eq!(x.threads, 4);
    assert!(x.records.is_empty());
    check_otf2(&dir, &trace, &x, 0);
    let q = parquet_query(&dir, &trace);
    assert_eq!(q["events"].as_u64().unwrap(), x.starts + x.ends + x.atomics);
    assert_eq!(q["matrix"].as_array().unwrap().len(), 0);
    let o = export_run(&dir.join("prof"), "parquet", &dir.join("prof-tables"), &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("profile-only"), "{err}");
    assert!(!dir.join("prof-tables").exists());
}
