//! Coarray Fortran (OpenCoarrays over MPI) run as `gaspard run -- cafrun ...`:
//! the MPI calls are recorded and the coarray operations recognised.

use std::process::Command;

use serde_json::Value;

mod common;
use common::{dump, events};

const PROGRAM: &str = r#"
program d
  implicit none
  integer :: a(10)[*], b(10), me, n, s, r
  me = this_image(); n = num_images()
  a = me
  sync all
  if (me == 1) a(:)[2] = 7
  sync all
  if (me /= 1) b = a(:)[1]
  s = me
  call co_sum(s)
  r = me * 10
  call co_broadcast(r, 2)
  critical
    s = s + 1
  end critical
  sync all
  if (s /= n * (n + 1) / 2 + 1 .or. r /= 20) error stop 3
end program d
"#;

fn of<'a>(evs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| e["kind"] == kind && e["phase"] != "END")
        .collect()
}

/// The program at `n` images: each image's coarray operations, recognised.
fn run_on(n: usize) {
    let dir = common::tmpdir(&format!("caf-{n}"));
    let src = dir.join("d.f90");
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join("d");
    let out = Command::new("caf")
        .arg("-g")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect(
        "caf is needed for the Coarray Fortran tests (Debian: gfortran libcoarrays-openmpi-dev)",
    );
    assert!(
        out.status.success(),
        "caf: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "cafrun",
            "-np",
            &n.to_string(),
            "--oversubscribe",
            exe.to_str().unwrap(),
        ],
    );
    let v = dump(&trace);
    let images = events(&v);
    assert_eq!(images.len(), n);
    let mut seen = Vec::new();
    for evs in &images {
        let me = evs
            .iter()
            .find(|e| e["kind"] == "GASP_MPI_INIT_THREAD" && e["phase"] == "END")
            .map(|e| e["args"]["rank"].as_u64().unwrap() + 1)
            .expect("MPI start-up recorded");
        seen.push(me);
        // The program's three `sync all`, not the runtime's own at the end.
        assert_eq!(of(evs, "GASP_CAF_SYNC_ALL").len(), 3, "image {me}");
        let coarray = of(evs, "GASP_CAF_COARRAY")
            .into_iter()
            .find(|e| e["args"]["size"] == 40)
            .expect("the 10-integer coarray");
        let id = &coarray["args"]["coarray"];
        let puts: Vec<&Value> = of(evs, "GASP_CAF_PUT")
            .into_iter()
            .filter(|e| &e["args"]["coarray"] == id)
            .collect();
        let gets: Vec<&Value> = of(evs, "GASP_CAF_GET")
            .into_iter()
            .filter(|e| &e["args"]["coarray"] == id)
            .collect();
        if me == 1 {
            assert_eq!(puts.len(), 1);
            assert_eq!(
                (
                    puts[0]["args"]["image"].as_u64(),
                    puts[0]["args"]["nbytes"].as_u64()
                ),
                (Some(2), Some(40))
            );
            assert!(gets.is_empty(), "image 1 reads its own coarray without MPI");
        } else {
            assert!(puts.is_empty());
            assert_eq!(gets.len(), 1);
            assert_eq!(
                (
                    gets[0]["args"]["image"].as_u64(),
                    gets[0]["args"]["nbytes"].as_u64()
                ),
                (Some(1), Some(40))
            );
        }
        assert_eq!(of(evs, "GASP_CAF_CO_SUM").len(), 1);
        let b = of(evs, "GASP_CAF_CO_BROADCAST");
        assert_eq!((b.len(), b[0]["args"]["root_image"].as_u64()), (1, Some(2)));
        assert!(
            !of(evs, "GASP_CAF_LOCK").is_empty(),
            "the critical section takes a lock"
        );
        // The MPI-level detail stays.
        assert!(!of(evs, "GASP_MPI_BARRIER").is_empty());
        // Each coarray operation at the program's line that made it, though
        // the MPI calls are made by the runtime linked into the program.
        let lines_of = |needle: &str| -> Vec<u64> {
            PROGRAM
                .lines()
                .enumerate()
                .filter(|(_, l)| l.trim_start().starts_with(needle))
                .map(|(i, _)| i as u64 + 1)
                .collect()
        };
        let at = |e: &Value| {
            assert!(
                e["file"].as_str().unwrap_or("").ends_with("d.f90"),
                "image {me}: {e}"
            );
            e["line"].as_u64().unwrap()
        };
        let syncs: Vec<u64> = of(evs, "GASP_CAF_SYNC_ALL").into_iter().map(at).collect();
        assert_eq!(syncs, lines_of("sync all"), "image {me}");
        for (list, needle) in [
            (&puts, "if (me == 1) a(:)[2]"),
            (&gets, "if (me /= 1) b = a(:)[1]"),
            (&of(evs, "GASP_CAF_CO_SUM"), "call co_sum"),
            (&of(evs, "GASP_CAF_CO_BROADCAST"), "call co_broadcast"),
            (&of(evs, "GASP_CAF_LOCK"), "critical"),
        ] {
            for e in list {
                assert_eq!(vec![at(e)], lines_of(needle), "image {me}: {e}");
            }
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        (1..=n as u64).collect::<Vec<_>>(),
        "one stream per image"
    );
    // The runtime's one-sided synchronization for the coarray get is listed
    // as made within the get, at its line; none at that line without it.
    let r = common::report(&trace);
    let get_line = PROGRAM
        .lines()
        .position(|l| l.contains("b = a(:)[1]"))
        .unwrap() as u64
        + 1;
    let at_get: Vec<&Value> = r["waits"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["location"]["line"] == get_line)
        .collect();
    assert!(!at_get.is_empty(), "{}", r["waits"]);
    for w in &at_get {
        assert_eq!(w["pattern"], "synchronization", "{w}");
        assert_eq!(w["within"], "GASP_CAF_GET", "{w}");
        assert!(
            w["call"].as_str().unwrap().starts_with("GASP_MPI_WIN_"),
            "{w}"
        );
    }
    // co_sum's MPI_Allreduce, an all-to-all collective, within the co_sum.
    let sum_line = PROGRAM
        .lines()
        .position(|l| l.contains("call co_sum"))
        .unwrap() as u64
        + 1;
    let sum = r["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["location"]["line"] == sum_line && w["pattern"] == "collective")
        .unwrap_or_else(|| panic!("no collective at line {sum_line}: {}", r["waits"]));
    assert_eq!(sum["call"], "GASP_MPI_ALLREDUCE", "{sum}");
    assert_eq!(sum["within"], "GASP_CAF_CO_SUM", "{sum}");
    assert_eq!(sum["calls"], n as u64, "one per image: {sum}");
}

#[test]
fn coarray_operations_are_recognised_on_2_images() {
    run_on(2);
}

#[test]
fn coarray_operations_are_recognised_on_4_images() {
    run_on(4);
}
