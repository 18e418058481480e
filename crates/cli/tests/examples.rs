//! The bundled examples, one per model, built and run as a user would, with
//! their decoded traces checked against what each program does.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

mod common;
use common::{dump, events};

fn example(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(rel)
}

fn build(name: &str, cmd: &[&str], src: &str) -> (PathBuf, PathBuf) {
    let dir = common::tmpdir(&format!("example-{name}"));
    let exe = dir.join(name);
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .arg(example(src))
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|_| panic!("{} is needed for the examples", cmd[0]));
    assert!(
        out.status.success(),
        "{}: {}",
        cmd[0],
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, exe)
}

fn run(dir: &Path, cmd: &[&str]) -> (Value, String) {
    let trace = dir.join("trace");
    let out = Command::new(env!("CARGO_BIN_EXE_gaspard"))
        .arg("run")
        .arg("-o")
        .arg(&trace)
        .arg("--")
        .args(cmd)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("OMP_TOOL_LIBRARIES")
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        dump(&trace),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn count(evs: &[Value], kind: &str, phase: &str) -> usize {
    evs.iter()
        .filter(|e| e["kind"] == kind && e["phase"] == phase)
        .count()
}

#[test]
fn shmem_heat() {
    let (dir, exe) = build("heat", &["oshcc", "-g"], "shmem/heat.c");
    let (v, out) = run(
        &dir,
        &[
            "oshrun",
            "-np",
            "2",
            "--oversubscribe",
            "--mca",
            "osc",
            "^rdma",
            exe.to_str().unwrap(),
            "10",
        ],
    );
    assert!(out.contains("heat: 10 steps on 2 PEs"), "{out}");
    for evs in events(&v) {
        assert_eq!(
            count(&evs, "GASP_SHMEM_DOUBLE_PUT", "START"),
            10,
            "one halo put per step"
        );
        assert_eq!(count(&evs, "GASP_SHMEM_BARRIER_ALL", "START"), 22);
        assert_eq!(count(&evs, "GASP_SHMEM_DOUBLE_SUM_TO_ALL", "START"), 1);
        let put = evs
            .iter()
            .find(|e| e["kind"] == "GASP_SHMEM_DOUBLE_PUT")
            .unwrap();
        assert!(
            put["objects"]["dest"]["object"]
                .as_str()
                .unwrap()
                .starts_with("heat.c:"),
            "{put}"
        );
    }
}

#[test]
fn mpi_rma_halo() {
    let (dir, exe) = build("rma_halo", &["mpicc", "-g"], "mpi/rma_halo.c");
    let (v, out) = run(
        &dir,
        &[
            "mpirun",
            "-np",
            "2",
            "--oversubscribe",
            exe.to_str().unwrap(),
            "20",
        ],
    );
    assert!(out.contains("rma_halo: 20 steps on 2 ranks"), "{out}");
    for evs in events(&v) {
        assert_eq!(count(&evs, "GASP_MPI_PUT", "START"), 20);
        assert_eq!(count(&evs, "GASP_MPI_WIN_FENCE", "START"), 40);
        assert_eq!(count(&evs, "GASP_MPI_ALLREDUCE", "START"), 2);
    }
}

#[test]
fn caf_jacobi() {
    let (dir, exe) = build("jacobi", &["caf", "-g"], "caf/jacobi.f90");
    let (v, out) = run(
        &dir,
        &[
            "cafrun",
            "-np",
            "2",
            "--oversubscribe",
            exe.to_str().unwrap(),
        ],
    );
    assert!(out.contains("jacobi: 50 steps on 2 images"), "{out}");
    for evs in events(&v) {
        assert_eq!(count(&evs, "GASP_CAF_SYNC_ALL", "START"), 101);
        assert_eq!(
            count(&evs, "GASP_CAF_GET", "START"),
            50,
            "one neighbour read per step"
        );
        assert_eq!(count(&evs, "GASP_CAF_CO_SUM", "START"), 1);
    }
}

#[test]
fn openmp_cg() {
    let (dir, exe) = build("cg", &["clang", "-fopenmp", "-g"], "openmp/cg.c");
    let (v, out) = run(&dir, &[exe.to_str().unwrap(), "5"]);
    assert!(out.contains("cg: 5 iterations"), "{out}");
    let threads = events(&v);
    assert!(threads.len() >= 2);
    for evs in &threads {
        assert_eq!(count(evs, "GASP_OMP_BARRIER", "START"), 5);
        assert_eq!(count(evs, "GASP_OMP_CRITICAL", "START"), 5);
        assert_eq!(count(evs, "GASP_OMP_LOOP", "START"), 16);
    }
}

#[test]
fn c_sort() {
    let gaspard = env!("CARGO_BIN_EXE_gaspard");
    let (dir, exe) = build(
        "sort",
        &[gaspard, "cc", "--profile", "--", "cc", "-g"],
        "c/sort.c",
    );
    let (v, out) = run(&dir, &[exe.to_str().unwrap(), "64"]);
    assert!(out.contains("sort: 64 numbers sorted twice"), "{out}");
    let evs = &events(&v)[0];
    let calls = |f: &str| {
        evs.iter()
            .filter(|e| {
                e["kind"] == "GASP_C_FUNC" && e["phase"] == "START" && e["args"]["funcsig"] == f
            })
            .count()
    };
    // sort(64) calls itself down to single elements: 127 calls a pass; merge is static.
    assert_eq!(calls("sort"), 2 * 127);
    assert_eq!(calls("main"), 1);
    assert_eq!(count(evs, "GASP_C_MALLOC", "START"), 1 + 2 * 63);
    assert_eq!(count(evs, "GASP_C_FREE", "START"), 1 + 2 * 63);
    let passes: Vec<&Value> = evs
        .iter()
        .filter(|e| e["name"] == "pass" && e["phase"] == "START")
        .collect();
    assert_eq!(
        passes
            .iter()
            .map(|e| e["text"].as_str().unwrap())
            .collect::<Vec<_>>(),
        vec!["0", "1"]
    );
}
