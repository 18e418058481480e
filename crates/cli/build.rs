//! With the `mpi` feature (on by default), builds the MPI calls of
//! `gaspard report --mpi` (csrc/mpi_transport.c) with the flags of the MPI
//! compiler wrapper (`MPICC`, else `mpicc`) into a shared object that the
//! binary carries and loads when `--mpi` is given. Without an MPI installation the
//! command is built without them and `--mpi` says so.

fn wrapper_flags(mpicc: &str, what: &str) -> Option<Vec<String>> {
    let out = std::process::Command::new(mpicc)
        .arg(format!("--showme:{what}"))
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect(),
    )
}

fn main() {
    println!("cargo:rustc-check-cfg=cfg(gaspard_mpi)");
    println!("cargo:rerun-if-changed=csrc/mpi_transport.c");
    println!("cargo:rerun-if-env-changed=MPICC");
    if std::env::var_os("CARGO_FEATURE_MPI").is_none() {
        return;
    }
    let mpicc = std::env::var("MPICC").unwrap_or_else(|_| "mpicc".to_string());
    let (Some(compile), Some(link)) = (
        wrapper_flags(&mpicc, "compile"),
        wrapper_flags(&mpicc, "link"),
    ) else {
        println!(
            "cargo:warning={mpicc} not found (or not Open MPI's): gaspard is built without `report --mpi`"
        );
        // Built with MPI as soon as it is installed.
        println!("cargo:rerun-if-changed=/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h");
        return;
    };
    // A shared object of its own, linked to MPI's libraries, carried inside
    // the binary and loaded only by `--mpi` (src/mpi.rs): the other
    // commands neither load MPI's libraries nor need them to start.
    let mut b = cc::Build::new();
    b.file("csrc/mpi_transport.c")
        .warnings(true)
        .pic(true)
        .cargo_metadata(false);
    for f in &compile {
        if let Some(dir) = f.strip_prefix("-I") {
            b.include(dir);
        } else {
            b.flag(f);
        }
    }
    let objects = b.compile_intermediates();
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let shim = out.join("libgaspard_mpi.so");
    let linked = b
        .get_compiler()
        .to_command()
        .arg("-shared")
        .arg("-o")
        .arg(&shim)
        .args(&objects)
        .args(&link)
        .status();
    if !linked.is_ok_and(|s| s.success()) {
        println!(
            "cargo:warning=the MPI transport could not be linked with {link:?}: gaspard is built without `report --mpi`"
        );
        return;
    }
    println!("cargo:rustc-env=GASPARD_MPI_SHIM={}", shim.display());
    println!("cargo:rustc-cfg=gaspard_mpi");
}
