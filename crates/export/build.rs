// Builds the small C layer over the OTF2 writer library (libotf2 from
// open-trace-format2) and links it.
fn main() {
    println!("cargo:rerun-if-changed=csrc/otf2_shim.c");
    let mut b = cc::Build::new();
    b.file("csrc/otf2_shim.c")
        .warnings(true)
        .extra_warnings(true);
    // Include paths from pkg-config when it knows OTF2 (Debian's headers are
    // in /usr/include/otf2, found without it).
    if let Ok(out) = std::process::Command::new("pkg-config")
        .args(["--cflags", "otf2"])
        .output()
    {
        if out.status.success() {
            for flag in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                if let Some(dir) = flag.strip_prefix("-I") {
                    b.include(dir);
                }
            }
        }
    }
    b.compile("gaspard_otf2_shim");
    println!("cargo:rustc-link-lib=open-trace-format2");
}
