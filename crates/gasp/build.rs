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
];

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
        .flag_if_supported("-fvisibility=hidden")
        .compile("gaspard_gasp_shim");
    // Export the C entry points from the cdylib (rustc's own version script
    // would hide them) and make sure the linker pulls them in.
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
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
