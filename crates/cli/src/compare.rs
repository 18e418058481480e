//! `gaspard compare`: several runs of one program side by side.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use gaspard_analyze::compare;

/// The long help of `gaspard compare`.
pub const HELP: &str = "\
Compare runs of one program, e.g. at 2, 4 and 8 processes: how the whole
program, each region and each finding scale.

The runs are sorted by process count, then thread count (--keep-order keeps
the order given); the first is the baseline. Each trace is read as `gaspard
report` reads it; a damaged trace is compared, with a warning. Runs are named
by their directory (with parent directories when names repeat).

Runs table:
  procs        processes
  threads      locations: the threads of all processes
  wall         the longest thread's active time (the runtime's start-up and
               shutdown left out)
  speedup      baseline wall / this run's wall
  efficiency   (baseline wall x baseline threads) / (wall x threads):
               1.00 is ideal scaling, 0.50 twice the ideal time
  compute, sync, comm
               each thread's time split, as in `gaspard report`, mean per
               thread

Region tables, by event name and by callsite (file:line and event), the top N
(--top) by time in the largest run: per run, the region's mean time per
thread (its time summed over the threads / threads) and, in parentheses, its
efficiency against ideal, the same formula with that time instead of the wall
time; '-' where the run has no such event. Source files are named relative to
the directory they share. \"does not scale\": the region's time per thread is
higher in the largest run than in the baseline, or its efficiency there is
below 0.50 (the largest run: most processes, then threads; only when it has
more threads than the baseline).

Findings table: each finding (kind and source line) with its severity in each
run (share of the threads' time at stake; '-' where absent). \"grows\": more
severe in the largest run than in the baseline. Findings of one kind at one
line in one run are added up.

--json prints one object: runs (as above, times in ns, compute/sync/comm
summed over the threads), largest (index of the largest run), regions (all of
them, each with count, total_ns, per_thread_ns, bytes, speedup and efficiency
per run) and findings (severity per run).";

/// Reads each trace, compares the runs, prints the comparison.
pub fn run(
    dirs: &[PathBuf],
    json: bool,
    top: usize,
    keep_order: bool,
    out: &mut dyn Write,
) -> Result<()> {
    if dirs.len() < 2 {
        bail!(
            "compare needs at least two trace directories ({} given), e.g. gaspard compare run-2pe run-4pe",
            dirs.len()
        );
    }
    for d in dirs {
        if !d.exists() {
            bail!("{} does not exist", d.display());
        }
    }
    let labels = compare::labels(dirs);
    let mut inputs = Vec::with_capacity(dirs.len());
    for (dir, label) in dirs.iter().zip(labels) {
        // Each run is read one process at a time, as `gaspard report` reads
        // it (the same report, in memory that does not grow with the run).
        let r = gaspard_analyze::distributed::report_by_process(
            dir,
            gaspard_analyze::blocks::DEFAULT_BLOCK_SIZE,
        )
        .with_context(|| format!("cannot compare {}", dir.display()))?;
        for p in &r.problems {
            eprintln!("gaspard: warning: {label}: {p}");
        }
        inputs.push((label, r));
    }
    let c = compare::compare(inputs, keep_order)?;
    if json {
        serde_json::to_writer_pretty(&mut *out, &c)?;
        writeln!(out)?;
    } else {
        compare::to_text(&c, top, out)?;
    }
    Ok(())
}
