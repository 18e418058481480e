//! Builds the C shim. `GASPARD_GASP_UPC_H=/dir` compiles it against another
//! runtime's `gasp_upc.h` (and `gasp.h`, when that directory has one);
//! `GASPARD_PTS_BYTES=N` sets the size of that runtime's pointer-to-shared.
use std::path::PathBuf;

const EXPORTS: &[&str] = &[
    "gasp_init",
    "gasp_event_notify",
    "gasp_event_notifyVA",
    "gasp_control",
    "gasp_create_event",
    "pupc_control",
    "pupc_create_event",
    "pupc_event_start",
    "pupc_event_end",
    "pupc_event_atomic",
    "pupc_ticks_now",
    "pupc_ticks_to_us",
    "pupc_tick_granularityus",
    "gaspard_pupc_context",
    "gaspard_flush",
    "__cyg_profile_func_enter",
    "__cyg_profile_func_exit",
    "__wrap_malloc",
    "__wrap_realloc",
    "__wrap_free",
    "ompt_start_tool",
    "gaspard_context",
    "gaspard_record_event",
    "gaspard_caf_range",
    "gaspard_caf_caller",
    "gaspard_clock_ns",
];

/// The directory holding `header`, asking the compiler wrapper first.
fn include_with(wrapper: &str, header: &str) -> Option<PathBuf> {
    let from_wrapper = std::process::Command::new(wrapper)
        .arg("--showme:incdirs")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    from_wrapper
        .split_whitespace()
        .map(PathBuf::from)
        .chain([PathBuf::from("/usr/lib/x86_64-linux-gnu/openmpi/include")])
        .find(|d| d.join(header).exists())
}

/// Builds an adapter library (`libgaspard_NAME.so` from `csrc/NAME_adapter.c`)
/// beside libgaspard.so when the runtime's headers are there.
fn build_adapter(out: &std::path::Path, name: &str, wrapper: &str, header: &str) {
    println!("cargo:rerun-if-changed=csrc/{name}_adapter.c");
    let Some(inc) = include_with(wrapper, header) else {
        println!("cargo:warning={header} not found: libgaspard_{name}.so is not built");
        // Build it as soon as the runtime is installed.
        println!("cargo:rerun-if-changed=/usr/lib/x86_64-linux-gnu/openmpi/include/{header}");
        return;
    };
    // OUT_DIR is target/<profile>/build/<crate>/out: the library goes to target/<profile>.
    let Some(dest) = out.ancestors().nth(3) else {
        return;
    };
    let cc = cc::Build::new().get_compiler();
    let status = cc
        .to_command()
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-fvisibility=hidden"])
        .arg(format!("-I{}", inc.display()))
        .arg(format!("csrc/{name}_adapter.c"))
        .arg("-o")
        .arg(dest.join(format!("libgaspard_{name}.so")))
        .status();
    match status {
        Ok(s) if s.success() => {}
        other => println!("cargo:warning=building libgaspard_{name}.so failed: {other:?}"),
    }
}

fn main() {
    let here = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let recorder = std::env::var("DEP_GASPARD_RECORDER_INCLUDE").expect("recorder include dir");
    println!("cargo:rerun-if-changed=csrc/gasp_shim.c");
    println!("cargo:rerun-if-changed=csrc/c_events.c");
    println!("cargo:rerun-if-changed=csrc/ompt_tool.c");
    println!("cargo:rerun-if-changed=include");
    println!("cargo:rerun-if-env-changed=GASPARD_GASP_UPC_H");
    println!("cargo:rerun-if-env-changed=GASPARD_PTS_BYTES");
    let mut b = cc::Build::new();
    if let Ok(dir) = std::env::var("GASPARD_GASP_UPC_H") {
        let dir = PathBuf::from(dir);
        if !dir.join("gasp_upc.h").exists() {
            panic!("GASPARD_GASP_UPC_H={}: no gasp_upc.h there", dir.display());
        }
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("gasp_upc.h").display()
        );
        b.include(dir);
    }
    if let Ok(n) = std::env::var("GASPARD_PTS_BYTES") {
        let n: u32 = n
            .parse()
            .expect("GASPARD_PTS_BYTES must be a number of bytes");
        b.define("GASPARD_PTS_BYTES", n.to_string().as_str());
    }
    b.include(here.join("include"))
        .include(&recorder)
        .file("csrc/gasp_shim.c")
        .file("csrc/c_events.c")
        .file("csrc/ompt_tool.c")
        .opt_level(2)
        // The release profile has debug info, with which cc keeps frame
        // pointers: on the recording hot path they cost a push, a move and a
        // pop per call (unwinding uses the DWARF tables anyway).
        .force_frame_pointer(false)
        .flag_if_supported("-fvisibility=hidden")
        .compile("gaspard_gasp_shim");
    // Export the C entry points from the cdylib (rustc's own version script
    // would hide them) and make sure the linker pulls them in.
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    build_adapter(&out, "shmem", "oshcc", "pshmem.h");
    build_adapter(&out, "mpi", "mpicc", "mpi.h");
    let script = out.join("exports.map");
    let list: String = EXPORTS.iter().map(|s| format!("{s}; ")).collect();
    std::fs::write(&script, format!("{{ global: {list}}};\n")).unwrap();
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        script.display()
    );
    for s in EXPORTS {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-u,{s}");
    }
}
