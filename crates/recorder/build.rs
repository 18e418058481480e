fn main() {
    println!("cargo:rerun-if-changed=csrc/gaspard_record.h");
    println!("cargo:rerun-if-changed=csrc/recorder.c");
    cc::Build::new()
        .file("csrc/recorder.c")
        .include("csrc")
        .opt_level(2)
        .flag_if_supported("-fvisibility=hidden")
        .compile("gaspard_recorder_c");
    let dir = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("csrc");
    println!("cargo:include={}", dir.display());
}
