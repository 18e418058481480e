//! Cross-run comparison: the reports of several runs of one program (at 2,
//! 4, 8 processes, say) side by side, with the scaling of the whole program,
//! of each region (event name, callsite) and of each finding.
//!
//! The first run, after sorting by process count then thread count, is the
//! baseline. For a run with `p` locations (threads of all processes) and time
//! `T`, against the baseline's `p0` and `T0`:
//!
//! - speedup = `T0 / T`;
//! - efficiency against ideal = `(T0 * p0) / (T * p)`: 1 when the work is
//!   shared perfectly, 0.5 when the run takes twice the ideal time.
//!
//! `T` is the wall time (the longest thread's active span, as in the
//! report's breakdown) for the whole program, and the mean time per thread
//! (`total_ns / threads`) for a region.

use std::collections::{BTreeMap, HashSet};

use rustc_hash::FxHashMap as HashMap;
use std::path::{Component, PathBuf};

use serde::Serialize;

use crate::profile::Report;

/// Why runs cannot be compared.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Fewer than two runs.
    #[error("comparing needs at least two trace directories, {0} given")]
    TooFewRuns(usize),
}

/// Efficiency at the largest run below which a region does not scale.
pub const POOR_EFFICIENCY: f64 = 0.5;

/// One run, summed up.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Short name: the trace directory's name (with as many parent
    /// directories as it takes to tell the runs apart).
    pub label: String,
    /// Trace directory.
    pub trace: String,
    /// Processes.
    pub processes: usize,
    /// Locations: threads of all processes (one per stream).
    pub threads: usize,
    /// Wall time: the longest thread's active span (start-up and shutdown of
    /// the runtime left out), ns.
    pub wall_ns: u64,
    /// Computation time, summed over the threads, ns.
    pub compute_ns: u64,
    /// Synchronization time, summed over the threads, ns.
    pub sync_ns: u64,
    /// Communication time, summed over the threads, ns.
    pub comm_ns: u64,
    /// Baseline's wall time over this run's; null when either is zero.
    pub speedup: Option<f64>,
    /// `(wall_base * threads_base) / (wall * threads)`; null when either is zero.
    pub efficiency: Option<f64>,
    /// Events the recorder lost.
    pub lost_events: u64,
    /// Problems met while reading the trace (a damaged trace still compares).
    pub problems: Vec<String>,
}

/// What a region is.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(rename_all = "lowercase")]
pub enum RegionKind {
    /// All events of one name.
    Event,
    /// The events of one name at one source line.
    Callsite,
}

/// A region in one run.
#[derive(Debug, Clone, Serialize, Default)]
pub struct RegionRun {
    /// Occurrences (0: absent from the run).
    pub count: u64,
    /// Time summed over the threads, ns.
    pub total_ns: u64,
    /// Mean time per thread: `total_ns / threads`, ns.
    pub per_thread_ns: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// Baseline's per-thread time over this run's; null when either is zero.
    pub speedup: Option<f64>,
    /// `(per_thread_base * threads_base) / (per_thread * threads)`; null when
    /// either time is zero.
    pub efficiency: Option<f64>,
}

/// A region (event name or callsite) across the runs.
#[derive(Debug, Clone, Serialize)]
pub struct Region {
    /// `event` or `callsite`.
    pub kind: RegionKind,
    /// Event name.
    pub name: String,
    /// Source file of a callsite, when known (null for events).
    pub file: Option<String>,
    /// Source line of a callsite (null for events).
    pub line: Option<u32>,
    /// One entry per run, in the order of [`Comparison::runs`].
    pub runs: Vec<RegionRun>,
    /// The region's time per thread is higher in the largest run than in the
    /// baseline, or its efficiency there is below 0.5.
    pub does_not_scale: bool,
}

impl Region {
    /// `name` for an event, `file:line name` for a callsite.
    pub fn title(&self) -> String {
        match (self.kind, &self.file) {
            (RegionKind::Event, _) => self.name.clone(),
            (RegionKind::Callsite, Some(f)) => {
                format!("{f}:{} {}", self.line.unwrap_or(0), self.name)
            }
            (RegionKind::Callsite, None) => format!("- {}", self.name),
        }
    }
}

/// A finding (kind and place) across the runs.
#[derive(Debug, Clone, Serialize)]
pub struct FindingTrend {
    /// `barrier_wait`, `load_imbalance`, ...
    pub kind: String,
    /// Source file, when known.
    pub file: Option<String>,
    /// Source line, when known.
    pub line: Option<u32>,
    /// Severity (share of the threads' time at stake) in each run, in the
    /// order of [`Comparison::runs`]; 0 where the run has no such finding.
    /// Findings of one kind at one place in one run are added up.
    pub severity: Vec<f64>,
    /// More severe in the largest run than in the baseline.
    pub grows: bool,
}

/// The comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The runs; the first is the baseline.
    pub runs: Vec<Run>,
    /// Index in `runs` of the largest run (most processes, then threads).
    pub largest: usize,
    /// Events, then callsites, each by time in the largest run, most first.
    pub regions: Vec<Region>,
    /// Findings by severity in the largest run, most first.
    pub findings: Vec<FindingTrend>,
}

/// Short names for trace directories: each directory's name, with as many
/// parent directories as it takes to tell them apart (`a/trace`, `b/trace`).
pub fn labels(dirs: &[PathBuf]) -> Vec<String> {
    let parts: Vec<Vec<String>> = dirs
        .iter()
        .map(|d| {
            let full = d.canonicalize().unwrap_or_else(|_| d.clone());
            full.components()
                .filter_map(|c| match c {
                    Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                    _ => None,
                })
                .collect()
        })
        .collect();
    let deepest = parts.iter().map(Vec::len).max().unwrap_or(0);
    let suffix = |k: usize| -> Vec<String> {
        parts
            .iter()
            .zip(dirs)
            .map(|(p, d)| {
                if p.is_empty() {
                    d.display().to_string()
                } else {
                    p[p.len().saturating_sub(k)..].join("/")
                }
            })
            .collect()
    };
    let distinct = |ls: &[String]| ls.iter().collect::<HashSet<_>>().len();
    let most = distinct(&suffix(deepest.max(1)));
    let k = (1..=deepest.max(1))
        .find(|&k| distinct(&suffix(k)) == most)
        .unwrap_or(1);
    // The same directory given more than once: number the repeats.
    let mut seen: HashMap<String, usize> = HashMap::default();
    suffix(k)
        .into_iter()
        .map(|l| {
            let n = seen.entry(l.clone()).or_default();
            *n += 1;
            if *n == 1 {
                l
            } else {
                format!("{l} ({n})")
            }
        })
        .collect()
}

/// `num / den` when both are positive.
fn ratio(num: f64, den: f64) -> Option<f64> {
    (num > 0.0 && den > 0.0).then(|| num / den)
}

type RegionKey = (RegionKind, String, Option<String>, Option<u32>);
type FindingKey = (String, Option<String>, Option<u32>);

/// Compares runs, each a label and its report. Unless `keep_order`, the runs
/// are sorted by process count then thread count; the first is the baseline.
pub fn compare(
    mut inputs: Vec<(String, Report)>,
    keep_order: bool,
) -> Result<Comparison, CompareError> {
    if inputs.len() < 2 {
        return Err(CompareError::TooFewRuns(inputs.len()));
    }
    if !keep_order {
        inputs.sort_by_key(|(_, r)| (r.processes, r.threads));
    }
    let n = inputs.len();
    let largest = (0..n)
        .max_by_key(|&i| (inputs[i].1.processes, inputs[i].1.threads))
        .unwrap_or(n - 1);

    let mut runs: Vec<Run> = inputs
        .iter()
        .map(|(label, r)| Run {
            label: label.clone(),
            trace: r.trace.clone(),
            processes: r.processes,
            threads: r.threads,
            wall_ns: r.breakdown.iter().map(|b| b.span_ns).max().unwrap_or(0),
            compute_ns: r.breakdown.iter().map(|b| b.compute_ns).sum(),
            sync_ns: r.breakdown.iter().map(|b| b.sync_ns).sum(),
            comm_ns: r.breakdown.iter().map(|b| b.comm_ns).sum(),
            speedup: None,
            efficiency: None,
            lost_events: r.lost_events,
            problems: r.problems.clone(),
        })
        .collect();
    let (wall0, p0) = (runs[0].wall_ns as f64, runs[0].threads as f64);
    for run in &mut runs {
        let (w, p) = (run.wall_ns as f64, run.threads as f64);
        run.speedup = ratio(wall0, w);
        run.efficiency = ratio(wall0 * p0, w * p);
    }
    // A larger run to measure growth against.
    let scaled = runs[largest].threads > runs[0].threads;

    let mut table: BTreeMap<RegionKey, Vec<RegionRun>> = BTreeMap::new();
    for (i, (_, r)) in inputs.iter().enumerate() {
        let mut add = |key: RegionKey, count: u64, total: u64, bytes: u64| {
            let cell = &mut table
                .entry(key)
                .or_insert_with(|| vec![RegionRun::default(); n])[i];
            cell.count += count;
            cell.total_ns += total;
            cell.bytes += bytes;
        };
        // The runtimes' start-up and shutdown (MPI_Init, shmem_finalize...)
        // are theirs, not the program's: not regions (the wall time leaves
        // them out too).
        let runtime = |name: &str| {
            gaspard_format::kinds::kind_by_name(name)
                .is_some_and(|k| crate::findings::is_startup(k.id))
        };
        for s in r.by_event.iter().filter(|s| !runtime(&s.name)) {
            let key = (RegionKind::Event, s.name.clone(), None, None);
            add(key, s.count, s.total_ns, s.bytes);
        }
        // Callsites differing only by column are one source line.
        for s in r.by_callsite.iter().filter(|s| !runtime(&s.stats.name)) {
            let key = (
                RegionKind::Callsite,
                s.stats.name.clone(),
                s.file.clone(),
                Some(s.line),
            );
            add(key, s.stats.count, s.stats.total_ns, s.stats.bytes);
        }
    }
    let mut regions: Vec<Region> = table
        .into_iter()
        .map(|((kind, name, file, line), mut cells)| {
            for (cell, run) in cells.iter_mut().zip(&runs) {
                cell.per_thread_ns = cell.total_ns as f64 / run.threads.max(1) as f64;
            }
            let t0 = cells[0].per_thread_ns;
            for (cell, run) in cells.iter_mut().zip(&runs) {
                let (t, p) = (cell.per_thread_ns, run.threads as f64);
                cell.speedup = ratio(t0, t);
                cell.efficiency = ratio(t0 * p0, t * p);
            }
            let last = &cells[largest];
            let does_not_scale = scaled
                && (last.per_thread_ns > t0
                    || last.efficiency.is_some_and(|e| e < POOR_EFFICIENCY));
            Region {
                kind,
                name,
                file,
                line,
                runs: cells,
                does_not_scale,
            }
        })
        .collect();
    regions.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then(b.runs[largest].total_ns.cmp(&a.runs[largest].total_ns))
            .then(b.runs[largest].count.cmp(&a.runs[largest].count))
            .then_with(|| a.title().cmp(&b.title()))
    });

    let mut found: BTreeMap<FindingKey, Vec<f64>> = BTreeMap::new();
    for (i, (_, r)) in inputs.iter().enumerate() {
        for f in &r.findings {
            let (file, line) = match &f.location {
                Some(l) => (Some(l.file.clone()), Some(l.line)),
                None => (None, None),
            };
            found
                .entry((f.kind.clone(), file, line))
                .or_insert_with(|| vec![0.0; n])[i] += f.severity;
        }
    }
    let mut findings: Vec<FindingTrend> = found
        .into_iter()
        .map(|((kind, file, line), severity)| FindingTrend {
            grows: scaled && severity[largest] > severity[0],
            kind,
            file,
            line,
            severity,
        })
        .collect();
    findings.sort_by(|a, b| {
        b.severity[largest]
            .total_cmp(&a.severity[largest])
            .then_with(|| {
                let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
                max(&b.severity).total_cmp(&max(&a.severity))
            })
            .then(a.kind.cmp(&b.kind))
    });
    Ok(Comparison {
        runs,
        largest,
        regions,
        findings,
    })
}

fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.3} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.3} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

/// The directory (ending in `/`) that all `files` are in; empty when they
/// share none.
fn common_dir<'a>(files: impl Iterator<Item = &'a str>) -> String {
    let mut common: Option<Vec<&str>> = None;
    for f in files {
        let mut parts: Vec<&str> = f.split('/').collect();
        parts.pop();
        common = Some(match common {
            None => parts,
            Some(c) => c
                .iter()
                .zip(&parts)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    let c = common.unwrap_or_default();
    if c.iter().all(|p| p.is_empty()) {
        return String::new();
    }
    format!("{}/", c.join("/"))
}

fn fmt_ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |x| format!("{x:.2}"))
}

/// The comparison as text: the runs (wall time, speedup, efficiency), the
/// `top` regions of each kind by time in the largest run, the findings.
pub fn to_text(c: &Comparison, top: usize, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let base = &c.runs[0];
    let big = &c.runs[c.largest];
    writeln!(
        out,
        "gaspard compare: {} runs, baseline {} ({}, {})",
        c.runs.len(),
        base.label,
        crate::count(base.processes as u64, "process", "processes"),
        crate::count(base.threads as u64, "thread", "threads")
    )?;
    let lw = c
        .runs
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    writeln!(
        out,
        "\nRuns (compute, sync, comm: mean per thread)\n  {:<lw$} {:>5} {:>7} {:>12} {:>8} {:>10} {:>12} {:>12} {:>12}",
        "run", "procs", "threads", "wall", "speedup", "efficiency", "compute", "sync", "comm"
    )?;
    for r in &c.runs {
        let per = |x: u64| fmt_ns(x as f64 / r.threads.max(1) as f64);
        writeln!(
            out,
            "  {:<lw$} {:>5} {:>7} {:>12} {:>8} {:>10} {:>12} {:>12} {:>12}",
            r.label,
            r.processes,
            r.threads,
            fmt_ns(r.wall_ns as f64),
            fmt_ratio(r.speedup),
            fmt_ratio(r.efficiency),
            per(r.compute_ns),
            per(r.sync_ns),
            per(r.comm_ns)
        )?;
    }
    // One column per run: mean time per thread and efficiency.
    let cw = c
        .runs
        .iter()
        .map(|r| r.label.chars().count())
        .max()
        .unwrap_or(0)
        .max(19);
    let tables: Vec<(&str, Vec<&Region>)> = [
        (RegionKind::Event, "event"),
        (RegionKind::Callsite, "callsite"),
    ]
    .into_iter()
    .map(|(kind, what)| {
        let rows = c
            .regions
            .iter()
            .filter(|r| r.kind == kind && r.runs[c.largest].count > 0)
            .take(top)
            .collect();
        (what, rows)
    })
    .collect();
    // Source files named relative to the directory they all share.
    let dir = common_dir(
        tables
            .iter()
            .flat_map(|(_, rows)| rows.iter().filter_map(|r| r.file.as_deref()))
            .chain(c.findings.iter().filter_map(|f| f.file.as_deref())),
    );
    let short = |f: &str| f.strip_prefix(dir.as_str()).unwrap_or(f).to_string();
    if !dir.is_empty() {
        writeln!(
            out,
            "
Source files under {dir}"
        )?;
    }
    let region_title = |r: &Region| match (r.kind, &r.file) {
        (RegionKind::Callsite, Some(f)) => {
            format!("{}:{} {}", short(f), r.line.unwrap_or(0), r.name)
        }
        _ => r.title(),
    };
    for (what, rows) in tables {
        if rows.is_empty() {
            continue;
        }
        let nw = rows
            .iter()
            .map(|r| region_title(r).chars().count())
            .max()
            .unwrap_or(0)
            .max(what.len());
        writeln!(
            out,
            "\nBy {what}, top {top} by time in {}: mean time per thread (efficiency)",
            big.label
        )?;
        write!(out, "  {what:<nw$}")?;
        for r in &c.runs {
            write!(out, " {:>cw$}", r.label)?;
        }
        writeln!(out)?;
        for reg in rows {
            write!(out, "  {:<nw$}", region_title(reg))?;
            for cell in &reg.runs {
                let s = if cell.count == 0 {
                    "-".to_string()
                } else {
                    format!(
                        "{} ({})",
                        fmt_ns(cell.per_thread_ns),
                        fmt_ratio(cell.efficiency)
                    )
                };
                write!(out, " {s:>cw$}")?;
            }
            if reg.does_not_scale {
                write!(out, "  does not scale")?;
            }
            writeln!(out)?;
        }
    }
    writeln!(out, "\nFindings: severity (share of the time at stake)")?;
    if c.findings.is_empty() {
        writeln!(out, "  none in any run")?;
        return Ok(());
    }
    let title = |f: &FindingTrend| match &f.file {
        Some(file) => format!("{} at {}:{}", f.kind, short(file), f.line.unwrap_or(0)),
        None => f.kind.clone(),
    };
    let nw = c
        .findings
        .iter()
        .map(|f| title(f).chars().count())
        .max()
        .unwrap_or(0)
        .max(7);
    let fw = lw.max(7);
    write!(out, "  {:<nw$}", "finding")?;
    for r in &c.runs {
        write!(out, " {:>fw$}", r.label)?;
    }
    writeln!(out)?;
    for f in &c.findings {
        write!(out, "  {:<nw$}", title(f))?;
        for s in &f.severity {
            let s = if *s > 0.0 {
                format!("{:.1}%", 100.0 * s)
            } else {
                "-".into()
            };
            write!(out, " {s:>fw$}")?;
        }
        if f.grows {
            write!(out, "  grows")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::{Breakdown, Finding, Location};
    use crate::profile::{SiteStats, Stats};

    fn stats(name: &str, count: u64, total_ns: u64) -> Stats {
        Stats {
            name: name.into(),
            count,
            total_ns,
            ..Default::default()
        }
    }

    /// A report of `threads` threads in as many processes, the longest
    /// working `wall`, with `events` (name, count, total) all at `a.c:7`.
    fn report(threads: usize, wall: u64, events: &[(&str, u64, u64)], wait: f64) -> Report {
        Report {
            trace: format!("t{threads}"),
            events: 0,
            lost_events: 0,
            unknown_tags: 0,
            threads,
            processes: threads,
            by_event: events.iter().map(|&(n, c, t)| stats(n, c, t)).collect(),
            by_callsite: events
                .iter()
                .map(|&(n, c, t)| SiteStats {
                    file: Some("/src/a.c".into()),
                    line: 7,
                    stats: stats(n, c, t),
                })
                .collect(),
            by_thread: Vec::new(),
            breakdown: (0..threads)
                .map(|i| Breakdown {
                    process: format!("h-{i}"),
                    stream: 0,
                    span_ns: wall.saturating_sub(i as u64),
                    compute_ns: wall.saturating_sub(i as u64 + 10),
                    sync_ns: 10,
                    comm_ns: 0,
                    parallel_ns: wall.saturating_sub(i as u64),
                })
                .collect(),
            findings: vec![Finding {
                kind: "barrier_wait".into(),
                severity: wait,
                threads: Vec::new(),
                location: Some(Location {
                    file: "/src/a.c".into(),
                    line: 7,
                }),
                message: String::new(),
            }],
            communication: Vec::new(),
            blocks: Default::default(),
            balance: Default::default(),
            waits: Vec::new(),
            locks: Vec::new(),
            problems: Vec::new(),
            clock_sync: Vec::new(),
        }
    }

    #[test]
    fn runs_sorted_and_scaled_against_the_first() {
        let runs = vec![
            (
                "four".to_string(),
                report(4, 300, &[("B", 8, 4000), ("W", 4, 800)], 0.4),
            ),
            (
                "two".to_string(),
                report(2, 500, &[("B", 4, 1000), ("W", 2, 800)], 0.1),
            ),
        ];
        let c = compare(runs, false).unwrap();
        assert_eq!(c.runs[0].label, "two");
        assert_eq!(c.largest, 1);
        assert_eq!(c.runs[1].wall_ns, 300);
        assert_eq!(c.runs[1].sync_ns, 40);
        assert_eq!(c.runs[0].efficiency, Some(1.0));
        assert_eq!(c.runs[1].speedup, Some(500.0 / 300.0));
        assert_eq!(c.runs[1].efficiency, Some(1000.0 / 1200.0));
        let b = c
            .regions
            .iter()
            .find(|r| r.kind == RegionKind::Event && r.name == "B")
            .unwrap();
        assert_eq!(b.runs[0].per_thread_ns, 500.0);
        assert_eq!(b.runs[1].per_thread_ns, 1000.0);
        assert_eq!(b.runs[1].efficiency, Some(0.25));
        assert!(b.does_not_scale);
        let w = c
            .regions
            .iter()
            .find(|r| r.kind == RegionKind::Callsite && r.name == "W")
            .unwrap();
        assert_eq!((w.file.as_deref(), w.line), (Some("/src/a.c"), Some(7)));
        assert_eq!(w.runs[1].efficiency, Some(1.0));
        assert!(!w.does_not_scale);
        assert_eq!(c.findings.len(), 1);
        assert_eq!(c.findings[0].severity, vec![0.1, 0.4]);
        assert!(c.findings[0].grows);
        let mut text = Vec::new();
        to_text(&c, 15, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("a.c:7 B"), "{text}");
        assert!(text.contains("does not scale"), "{text}");
    }

    #[test]
    fn keep_order_and_absent_regions() {
        let runs = vec![
            ("four".to_string(), report(4, 300, &[("B", 8, 4000)], 0.4)),
            ("two".to_string(), report(2, 500, &[("N", 2, 800)], 0.0)),
        ];
        let c = compare(runs, true).unwrap();
        assert_eq!(c.runs[0].label, "four");
        assert_eq!(c.largest, 0);
        let n = c.regions.iter().find(|r| r.name == "N").unwrap();
        assert_eq!(n.runs[0].count, 0);
        assert_eq!(n.runs[1].speedup, None);
        // Nothing grows when no run is larger than the baseline.
        assert!(c.regions.iter().all(|r| !r.does_not_scale));
        assert!(c.findings.iter().all(|f| !f.grows));
    }

    #[test]
    fn too_few_runs() {
        let one = vec![("a".to_string(), report(2, 5, &[], 0.0))];
        assert!(matches!(
            compare(one, false),
            Err(CompareError::TooFewRuns(1))
        ));
    }

    #[test]
    fn labels_tell_runs_apart() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(labels(&[p("/x/r2"), p("/x/r4")]), ["r2", "r4"]);
        assert_eq!(
            labels(&[p("/x/a/trace"), p("/x/b/trace")]),
            ["a/trace", "b/trace"]
        );
        assert_eq!(labels(&[p("/x/r2"), p("/x/r2")]), ["r2", "r2 (2)"]);
    }

    #[test]
    fn common_directory_of_files() {
        assert_eq!(common_dir(["/s/a.c", "/s/b/c.c"].into_iter()), "/s/");
        assert_eq!(common_dir(["/s/a.c", "/t/b.c"].into_iter()), "");
        assert_eq!(common_dir(std::iter::empty()), "");
    }
}
