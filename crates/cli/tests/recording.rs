//! Recording under pressure, and the command line's errors, with the real library.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

mod common;
use common::dump;

fn tmp(name: &str) -> std::path::PathBuf {
    common::tmpdir(&format!("rec-{name}"))
}

/// Compiles `src` against gaspard's headers and the debug libgaspard.
fn compile(name: &str, src: &str) -> PathBuf {
    common::compile_gasp(&tmp(&format!("bin-{name}")), name, src, "-O1")
}

const PRESSURE: &str = r#"
#include <gasp_upc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static int g_argc; static char **g_argv; static long n;
static void *run(void *a) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &g_argc, &g_argv);
  unsigned ev = gasp_create_event(c, "payload", "%s");
  char s[64];
  for (long i = 0; i < n; i++) {
    snprintf(s, sizeof s, "%040ld-%020ld", i * 7919, i);  /* 61 bytes that change */
    gasp_event_notify(c, ev, GASP_START, "p.c", 1, 0, s);
    gasp_event_notify(c, ev, GASP_END, "p.c", 2, 0, s);
  }
  return a;
}
int main(int argc, char **argv) {
  g_argc = argc; g_argv = argv; n = atol(argv[1]);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, run, 0);
  for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
  return 0;
}
"#;

/// Counts recorded events and LOST records, and sums what LOST records say.
fn tally(v: &Value) -> (u64, u64, u64) {
    let (mut recorded, mut lost_records, mut lost_in_records) = (0, 0, 0);
    for th in v["threads"].as_array().unwrap() {
        for e in th["events"].as_array().unwrap() {
            match e["kind"].as_str().unwrap() {
                "GASPARD_LOST" => {
                    lost_records += 1;
                    lost_in_records += e["args"]["events"].as_u64().unwrap();
                }
                _ => recorded += 1,
            }
        }
    }
    (recorded, lost_records, lost_in_records)
}

#[test]
fn memory_cap_drops_are_counted_exactly() {
    let exe = compile("pressure", PRESSURE);
    let per_thread: u64 = 20_000;
    // Two threads, each one GASPARD_INIT and a pair of user events per iteration
    // (about 70 bytes each: several times the 1 MiB cap while the flusher is held back).
    let sent = 2 * (1 + 2 * per_thread);
    // Waiting: a slow flusher. Dropping: a flusher that writes nothing before
    // the program ends, so that the cap is reached however loaded the machine.
    for (policy, name, delay) in [("wait", "wait", "20"), ("drop", "drop", "3600000")] {
        let dir = tmp(name);
        let st = Command::new(&exe)
            .arg(per_thread.to_string())
            .env("GASPARD_DIR", &dir)
            .env("GASPARD_BUFFER_KB", "8")
            .env("GASPARD_MAX_MB", "1")
            .env("GASPARD_ON_FULL", policy)
            .env("GASPARD_FLUSH_DELAY_MS", delay)
            .status()
            .unwrap();
        assert!(st.success());
        let v = dump(&dir);
        let (recorded, lost_records, lost_in_records) = tally(&v);
        let lost = v["lost_events"].as_u64().unwrap();
        assert_eq!(
            recorded + lost,
            sent,
            "{policy}: every event is either in the trace or counted as lost"
        );
        assert_eq!(
            lost_in_records, lost,
            "{policy}: the trace says where each loss happened"
        );
        if policy == "wait" {
            assert_eq!(lost, 0, "waiting for the flusher loses nothing");
        } else {
            assert!(lost > 0, "the cap must have forced drops");
            assert!(lost_records > 0);
        }
        assert_eq!(v["processes"][0]["status"], "complete");
    }
}

#[test]
fn measurement_off_costs_nothing_on_disk() {
    let src = r#"
#include <gasp_upc.h>
int main(int argc, char **argv) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &argc, &argv);
  if (!gasp_control(c, 0)) return 3;                 /* nonzero before any call */
  for (int i = 0; i < 1000; i++) gasp_event_notify(c, GASP_UPC_FENCE, GASP_START, "f.c", 2, 0);
  if (gasp_control(c, 1) != 0) return 4;             /* the last value set */
  gasp_event_notify(c, GASP_UPC_FENCE, GASP_ATOMIC, "f.c", 3, 0);
  return argc == 1 ? 0 : 5;                          /* --gaspard-* options were taken out */
}
"#;
    let exe = compile("off", src);
    let dir = tmp("off");
    let st = Command::new(&exe)
        .arg(format!("--gaspard-dir={}", dir.display()))
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(0));
    let v = dump(&dir);
    let kinds: Vec<(String, String)> = v["threads"][0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["kind"].as_str().unwrap().to_string(),
                e["phase"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let k = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        kinds,
        vec![
            k("GASPARD_INIT", "ATOMIC"),
            k("GASPARD_MEASUREMENT", "ATOMIC"),
            k("GASPARD_MEASUREMENT", "ATOMIC"),
            k("GASP_UPC_FENCE", "ATOMIC")
        ]
    );
    assert_eq!(v["threads"][0]["events"][1]["args"]["on"], 0);
    assert_eq!(v["threads"][0]["events"][2]["args"]["on"], 1);
    assert_eq!(v["threads"][0]["events"][3]["line"], 3);
}

#[test]
fn cli_reports_bad_input_clearly() {
    let bin = env!("CARGO_BIN_EXE_gaspard");
    let out = Command::new(bin)
        .args(["dump", "/nonexistent/gaspard-trace"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    let empty = tmp("cli-empty");
    let out = Command::new(bin)
        .arg("report")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no gaspard trace"));
    let out = Command::new(bin)
        .args(["run", "--", "/nonexistent/program"])
        .current_dir(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot run"));
}

#[test]
fn run_passes_the_exit_status_and_the_directory() {
    let src = r#"
#include <gasp_upc.h>
int main(int argc, char **argv) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &argc, &argv);
  gasp_event_notify(c, GASP_UPC_BARRIER, GASP_START, "b.c", 1, 0, 0, 0);
  gasp_event_notify(c, GASP_UPC_BARRIER, GASP_END, "b.c", 1, 0, 0, 0);
  return 7;
}
"#;
    let exe = compile("status", src);
    let dir = tmp("run-out");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("run")
        .arg("-o")
        .arg(&dir)
        .arg("--")
        .arg(&exe)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7));
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("report")
        .arg(&dir)
        .arg("--json")
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["threads"], 1);
    let b = r["by_event"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "GASP_UPC_BARRIER")
        .unwrap();
    assert_eq!(b["count"], 1, "a START/END pair counts once");
}

#[test]
fn many_user_events_interleaved_keep_their_values() {
    // 40 user events share 16 slots of the encoder's memory of previous
    // arguments: every value must still come back exactly.
    let src = r#"
#include <gasp_upc.h>
#include <stdio.h>
int main(int argc, char **argv) {
  gasp_context_t c = gasp_init(GASP_MODEL_UPC, &argc, &argv);
  unsigned ev[40];
  char name[16];
  for (int k = 0; k < 40; k++) {
    snprintf(name, sizeof name, "ev%d", k);
    ev[k] = gasp_create_event(c, name, k % 2 ? "%d %f %s" : "%ld %p");
  }
  for (int i = 0; i < 200; i++) {
    int k = (i * 7) % 40;
    if (k % 2) gasp_event_notify(c, ev[k], GASP_ATOMIC, "u.c", i, 0, i * k, i * 0.25 - k, i % 3 ? "abc" : "a longer string, over eight bytes");
    else gasp_event_notify(c, ev[k], GASP_ATOMIC, "u.c", i, 0, (long)i * 1000003L * k, (void *)(long)(i + k));
  }
  return 0;
}
"#;
    let exe = compile("users", src);
    let dir = tmp("users");
    assert!(Command::new(&exe)
        .env("GASPARD_DIR", &dir)
        .status()
        .unwrap()
        .success());
    let v = dump(&dir);
    let events: Vec<&Value> = v["threads"][0]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "GASPARD_USER")
        .collect();
    assert_eq!(events.len(), 200);
    for (i, e) in events.iter().enumerate() {
        let i = i as i64;
        let k = (i * 7) % 40;
        assert_eq!(e["name"], format!("ev{k}"));
        assert_eq!(e["line"], i);
        let want: Vec<Value> = if k % 2 == 1 {
            let s = if i % 3 != 0 {
                "abc"
            } else {
                "a longer string, over eight bytes"
            };
            vec![
                (i * k).into(),
                (i as f64 * 0.25 - k as f64).into(),
                s.into(),
            ]
        } else {
            vec![(i * 1_000_003 * k).into(), format!("{:#x}", i + k).into()]
        };
        assert_eq!(e["values"].as_array().unwrap(), &want, "event {i}");
    }
}

/// A small tmpfs mounted for the test, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn full_disk_loses_only_what_did_not_fit_and_says_so() {
    let uid = Command::new("id").arg("-u").output().unwrap();
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        eprintln!("full_disk: mounting a tmpfs needs root; not run");
        return;
    }
    let exe = compile("pressure_disk", PRESSURE);
    let mnt = tmp("full-disk");
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&mnt)
        .status()
        .unwrap();
    assert!(st.success(), "cannot mount a tmpfs on {}", mnt.display());
    let guard = Tmpfs(mnt.clone());
    let dir = mnt.join("trace");
    let per_thread: u64 = 20_000;
    let sent = 2 * (1 + 2 * per_thread);
    let out = Command::new(&exe)
        .arg(per_thread.to_string())
        .env("GASPARD_DIR", &dir)
        .env("GASPARD_BUFFER_KB", "64")
        .output()
        .unwrap();
    assert!(out.status.success(), "the program finishes normally");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("No space left on device"), "{err}");
    let v = dump(&dir);
    let (recorded, _, _) = tally(&v);
    let lost = v["lost_events"].as_u64().unwrap();
    assert!(
        lost > 0 && recorded + lost == sent,
        "{recorded} + {lost} != {sent}"
    );
    assert_eq!(
        v["processes"][0]["status"], "complete",
        "the manifest is written from the space set aside"
    );
    let r = common::report(&dir);
    assert_eq!(r["lost_events"], lost);
    assert!(
        r["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p.as_str().unwrap().contains("No space left on device")),
        "{:#}",
        r["problems"]
    );
    assert!(
        !std::fs::read_dir(&dir).unwrap().any(|e| e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".reserve")),
        "the reserve is given back"
    );
    drop(guard);
}
