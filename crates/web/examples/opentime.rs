//! How long the browser view takes to open a trace: the quick scan, then
//! the timeline built from it (what `gaspard view` does before it prints its
//! URL). Used for the instruction counts in BENCHMARKS.md:
//!
//! ```text
//! cargo build --release --example opentime -p gaspard-web
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind target/release/examples/opentime TRACE_DIR
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args().nth(1) else {
        eprintln!("usage: opentime TRACE_DIR");
        return ExitCode::from(2);
    };
    let t0 = std::time::Instant::now();
    let q = match gaspard_analyze::scan::scan(std::path::Path::new(&dir)) {
        Ok(q) => q,
        Err(e) => {
            eprintln!("opentime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let events = q.events();
    let scanned = t0.elapsed();
    let tl = gaspard_web::timeline::Timeline::from_quick(q);
    eprintln!(
        "{events} events, {} threads: scan {:?}, timeline {:?}",
        tl.threads.len(),
        scanned,
        t0.elapsed() - scanned
    );
    ExitCode::SUCCESS
}
