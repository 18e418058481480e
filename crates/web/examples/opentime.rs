//! How long the browser view takes to open a trace: the quick scan, then
//! the timeline built from it (what `gaspard view` does before it prints its
//! URL on a small trace), or with `--overview` the overview and its
//! timeline (what it does on a big one). Used for the instruction counts in
//! BENCHMARKS.md:
//!
//! ```text
//! cargo build --release --example opentime -p gaspard-web
//! RAYON_NUM_THREADS=1 valgrind --tool=callgrind target/release/examples/opentime [--overview] TRACE_DIR
//! ```

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let overview = args.first().is_some_and(|a| a == "--overview");
    if overview {
        args.remove(0);
    }
    let Some(dir) = args.first().cloned() else {
        eprintln!("usage: opentime [--overview] TRACE_DIR");
        return ExitCode::from(2);
    };
    let t0 = std::time::Instant::now();
    if overview {
        use gaspard_web::timeline::{Timeline, CLASSES};
        let o = match gaspard_analyze::scan::overview(
            std::path::Path::new(&dir),
            1 << 15,
            CLASSES.len(),
            Timeline::overview_class,
        ) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("opentime: {e}");
                return ExitCode::FAILURE;
            }
        };
        let events: u64 = o.streams.iter().map(|s| s.events).sum();
        let scanned = t0.elapsed();
        let threads = Timeline::from_overview(o).map_or(0, |tl| tl.threads.len());
        eprintln!(
            "{events} events, {threads} threads: overview {:?}, timeline {:?}",
            scanned,
            t0.elapsed() - scanned
        );
        return ExitCode::SUCCESS;
    }
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
