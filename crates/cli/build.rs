//! With the `mpi` feature (on by default), builds the MPI calls of
//! `gaspard report --mpi` (csrc/mpi_transport.c) with the flags of the MPI
//! compiler wrapper (`MPICC`, else `mpicc`). Without an MPI installation the
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
    let mut b = cc::Build::new();
    b.file("csrc/mpi_transport.c").warnings(true);
    for f in &compile {
        if let Some(dir) = f.strip_prefix("-I") {
            b.include(dir);
        } else {
            b.flag(f);
        }
    }
    b.compile("gaspard_mpi_transport");
    for f in &link {
        if let Some(dir) = f.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={dir}");
        } else if let Some(lib) = f.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={lib}");
        } else if let Some(arg) = f.strip_prefix("-Wl,") {
            for a in arg.split(',') {
                println!("cargo:rustc-link-arg={a}");
            }
        } else {
            println!("cargo:rustc-link-arg={f}");
        }
    }
    println!("cargo:rustc-cfg=gaspard_mpi");
}
