//! The browser view of a gaspard trace.
//!
//! [`View`] holds what the interface shows: the report (`gaspard report
//! --json`), the block map of each shared object per epoch, where each
//! finding happens, and the [`timeline::Timeline`]. [`server`] serves it
//! from 127.0.0.1; [`View::html`] writes it as one self-contained file.
#![warn(missing_docs, missing_debug_implementations)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde_json::{json, Value};

use gaspard_analyze::trace::{Trace, TraceError};

pub mod index;
pub mod server;
pub mod timeline;

/// Spans sent per thread for one timeline request.
pub const SPANS_PER_THREAD: usize = 4000;
/// Callsites whose line of text the summary carries at most.
const MAX_SITE_LINES: usize = 20_000;
/// Block-epoch entries the summary carries at most.
const MAX_BLOCK_EPOCHS: usize = 20_000;
/// Columns of the timeline embedded in an HTML file, per thread, at most.
const HTML_COLUMNS: usize = 2048;
/// Bytes of summary columns an HTML file embeds, all threads together
/// (about 6 per column and thread).
const HTML_COLUMN_BYTES: usize = 600_000;
/// Spans embedded in an HTML file, all threads together (about 55 bytes each).
const HTML_SPANS: usize = 12_000;
/// Block-epoch entries an HTML file embeds.
const HTML_BLOCK_EPOCHS: usize = 4_000;

const PAGE: &str = include_str!("../assets/index.html");
/// The interface's script.
pub const APP_JS: &str = include_str!("../assets/app.js");
/// The interface's style sheet.
pub const APP_CSS: &str = include_str!("../assets/app.css");

/// What the interface shows at one stage of reading a trace: its timeline
/// and its "core" (thread rows, span names, callsites, time span).
#[derive(Debug)]
struct Stage {
    /// `index` (the view index's pyramids), `quick` (the quick scan's
    /// spans) or `full` (the whole trace).
    name: &'static str,
    /// The whole trace, once read (the other stages have none).
    trace: Option<Arc<Trace>>,
    /// The trace directory.
    dir: PathBuf,
    /// The process and stream number of each row, when the spans are a
    /// quick scan's (their events are then read on demand, a process at a
    /// time: [`View::event_json`]).
    rows: Vec<(String, u32)>,
    callsites: Vec<gaspard_analyze::trace::Callsite>,
    /// Shared by a quick stage and the full stage made of it.
    timeline: Arc<timeline::Timeline>,
    /// Whether the spans are those the whole trace gives (a quick scan's of
    /// a trace without coarray operations to recognise:
    /// [`gaspard_analyze::scan::Quick::is_whole`]).
    whole: bool,
    core: Value,
    core_text: String,
    sources: HashSet<String>,
    /// The summary with this stage's core, once asked for.
    summary: OnceLock<String>,
}

/// Everything the interface shows of one trace.
///
/// The timeline and the core are there from the start; the report
/// ([`View::summary_json`]) may come later. A view opened
/// on a directory ([`View::open`]) starts with the timeline of its view
/// index ([`index`]), if there is a valid one, or else of a quick scan of
/// the trace ([`gaspard_analyze::scan`]), and moves to the quick scan's then
/// to the whole trace's as they are read, together with the report.
#[derive(Debug)]
pub struct View {
    stage: RwLock<Arc<Stage>>,
    /// The report's part of the summary (the core is the stage's).
    report: OnceLock<Value>,
    /// Why the whole trace could not be read, if it could not.
    failed: OnceLock<String>,
    /// Why the whole trace is not read (it would not fit in memory): the
    /// report is then computed one process at a time, and the timeline
    /// stays the quick scan's.
    note: OnceLock<String>,
    /// The last process read for the details of one of its events while
    /// the spans are a quick scan's.
    details: Mutex<Option<(PathBuf, String, Arc<Trace>)>>,
    /// Where each stream's chunks are, when an overview found them (or the
    /// view index kept them): windows of the timeline are then read from
    /// the trace while the stage has only columns ([`View::timeline_json`]).
    windows: OnceLock<Arc<gaspard_analyze::scan::Windows>>,
    /// The start of each span sent from windows read so far, by (row, event).
    window_starts: Mutex<std::collections::HashMap<(usize, u32), u64>>,
    /// The files of the callsites of windows read so far (their text may
    /// be shown, as the stage's callsites' are).
    window_sources: Mutex<HashSet<String>>,
}

/// Events a window of the timeline may read from the trace at most
/// (`GASPARD_VIEW_WINDOW_EVENTS` sets it): about 0.2 s of reading (2.5 M
/// events of `bench/gen_trace.c` in 50 ms, BENCHMARKS.md); a wider window
/// is answered with columns until the spans are known.
fn window_events() -> u64 {
    std::env::var("GASPARD_VIEW_WINDOW_EVENTS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(8_000_000)
}

/// Span starts kept for the details of events of windows read, at most.
const WINDOW_STARTS: usize = 1 << 20;

impl View {
    /// The view of `trace`, whose report is already computed.
    pub fn with_report(trace: Trace, report: &gaspard_analyze::profile::Report) -> View {
        let trace = Arc::new(trace);
        let timeline = timeline::Timeline::build(&trace);
        let view = View::of(Stage::full(trace, timeline));
        view.set_report(report);
        view
    }

    /// The view of the trace in `dir` from a quick scan of it, with
    /// `report` computed apart (one process at a time, for a trace too big
    /// to read whole), and `note` saying so.
    pub fn quick_with_report(
        dir: &Path,
        report: &gaspard_analyze::profile::Report,
        note: &str,
    ) -> Result<View, TraceError> {
        let (stage, _) = quick_stage(dir)?;
        let whole = stage.whole;
        let view = View::of(stage);
        if !whole {
            let _ = view.note.set(note.to_string());
        }
        view.set_report(report);
        Ok(view)
    }

    /// The view of a big trace in `dir` (stream files of
    /// `GASPARD_VIEW_OVERVIEW_BYTES` or more, as [`View::open`] counts them)
    /// whose quick scan gives the whole trace's timeline, and its report
    /// computed one process at a time: what `gaspard report --html` writes
    /// without holding the whole trace. `None` for a smaller trace, or one
    /// whose whole reading adds to the quick scan (Coarray Fortran).
    pub fn big_with_report(
        dir: &Path,
        block_size: u64,
    ) -> Result<Option<(View, gaspard_analyze::profile::Report)>, TraceError> {
        let bytes = index::fingerprint(dir)
            .map_err(|e| TraceError::Dir {
                path: dir.to_path_buf(),
                source: e,
            })
            .map(|f| index::stream_bytes(&f))?;
        if bytes < overview_bytes() {
            return Ok(None);
        }
        let (stage, _) = quick_stage(dir)?;
        if !stage.whole {
            return Ok(None);
        }
        let report = gaspard_analyze::distributed::report_by_process(dir, block_size)?;
        let view = View::of(Stage::full_of(&stage));
        view.set_report(&report);
        Ok(Some((view, report)))
    }

    /// The trace in `dir`, quickly: the timeline (and the summary, if
    /// known) of its view index if it has a valid one, else of a quick scan
    /// now; in the background, the quick scan (if not done yet), then the
    /// whole trace read, its timeline and its report, each replacing what
    /// was shown (the summary and the core say which stage is shown). The
    /// view index is written when missing or out of date ([`index`]).
    pub fn open(dir: &Path, block_size: u64) -> Result<Arc<View>, TraceError> {
        let canonical = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let fingerprint = index::fingerprint(&canonical).ok();
        let stream_bytes = fingerprint.as_deref().map(index::stream_bytes);
        let found = match &fingerprint {
            Some(now) => index::load(&canonical, now),
            None => index::Found::Absent,
        };
        let mut ix = match found {
            index::Found::Valid(ix, _) => Some(ix),
            index::Found::Absent => None,
            index::Found::Invalid(why) => {
                eprintln!("gaspard view: {why}");
                None
            }
        };
        let windows = ix.as_mut().and_then(|ix| {
            let b = ix.windows.take()?;
            gaspard_analyze::scan::Windows::from_bytes(dir, &b)
        });
        let indexed = ix.map(|mut ix| {
            let summary = ix
                .summary
                .take()
                .filter(|_| ix.block_size == block_size)
                .and_then(|s| serde_json::from_str::<Value>(&s).ok());
            let timeline = ix.take_timeline();
            (std::mem::take(&mut ix.callsites), timeline, summary)
        });
        // The index is written from the quick stage when there was none,
        // and from the full stage when it lacks the report.
        let bg_work = Background {
            dir: dir.to_path_buf(),
            canonical,
            fingerprint,
            block_size,
            write_quick: !matches!(indexed, Some((_, Some(_), _))),
            write_full: true,
        };
        let (view, quick_events) = match indexed {
            Some((callsites, Some(timeline), summary)) => {
                let mut stage = Stage::new("index", None, dir.to_path_buf(), callsites, timeline);
                let windows = windows.filter(|w| w.len() == stage.timeline.threads.len());
                if let Some(w) = &windows {
                    stage.rows = w.rows();
                }
                let view = View::of(stage);
                if let Some(w) = windows {
                    let _ = view.windows.set(Arc::new(w));
                }
                let has_summary = summary.is_some();
                if let Some(s) = summary {
                    let _ = view.report.set(s);
                }
                let bg = Background {
                    write_full: !has_summary,
                    ..bg_work
                };
                let view = Arc::new(view);
                bg.spawn(&view, None);
                return Ok(view);
            }
            _ => {
                let overview = if stream_bytes.is_some_and(|b| b >= overview_bytes()) {
                    overview_stage(dir)?
                } else {
                    None
                };
                // The background reads the quick scan after an overview;
                // otherwise it only writes the index from this one.
                let (stage, events, windows) = match overview {
                    Some((stage, events, windows)) => (stage, events, Some(windows)),
                    None => {
                        let (stage, events) = quick_stage(dir)?;
                        (stage, events, None)
                    }
                };
                let quick = windows.is_none();
                let view = View::of(stage);
                if let Some(w) = windows {
                    let _ = view.windows.set(Arc::new(w));
                }
                let view = Arc::new(view);
                (view, quick.then_some(events))
            }
        };
        bg_work.spawn(&view, quick_events);
        Ok(view)
    }

    /// Reads the whole trace, shows its timeline, then its report.
    fn read_whole(&self, dir: &Path, block_size: u64) -> Option<Arc<Stage>> {
        match gaspard_analyze::trace::read(dir) {
            Ok(trace) => {
                let trace = Arc::new(trace);
                let timeline = timeline::Timeline::build(&trace);
                let stage = Arc::new(Stage::full(Arc::clone(&trace), timeline));
                // The whole trace's timeline as soon as it is built (the
                // page sees the stage change in the timeline's answers),
                // then the report (unless the view index had it).
                self.show(Arc::clone(&stage));
                if self.report.get().is_none() {
                    let report = gaspard_analyze::profile::report_with(&trace, block_size);
                    self.set_report_of(&stage, &report);
                }
                Some(stage)
            }
            Err(e) => {
                let _ = self.failed.set(e.to_string());
                None
            }
        }
    }

    /// Whether the whole trace, of `events`, would take more memory than
    /// there is (said in [`View::note`]): rather than be killed for want of
    /// it, the view keeps the quick timeline, and its report is computed
    /// one process at a time.
    fn too_big(&self, events: u64) -> bool {
        let need = events.saturating_mul(BYTES_PER_EVENT);
        let Some(free) = available_memory().filter(|&free| need > free) else {
            return false;
        };
        let _ = self.note.set(format!(
            "the whole trace ({events} events) would take about {:.1} GB of memory, and {:.1} GB \
             are available: it is analysed one process at a time, the timeline is the quick scan's, \
             and the details of an event are read from its process alone",
            need as f64 / 1e9,
            free as f64 / 1e9
        ));
        true
    }

    /// Computes the report one process at a time (the whole trace does not
    /// fit in memory), unless the view index gave it.
    fn report_by_process(&self, dir: &Path, block_size: u64) {
        if self.report.get().is_some() {
            return;
        }
        match gaspard_analyze::distributed::report_by_process(dir, block_size) {
            Ok(report) => self.set_report(&report),
            Err(e) => {
                let _ = self.failed.set(e.to_string());
            }
        }
    }

    /// The summary: the report's part, the core's, and the note, if any.
    fn with_core(&self, report: &Value, core: &Value) -> Value {
        let mut summary = with_core(report, core);
        if let Some(note) = self.note.get() {
            summary["note"] = json!(note);
        }
        summary
    }

    /// Why the whole trace is not read, when it is not (too big for the
    /// memory available).
    pub fn note(&self) -> Option<&str> {
        self.note.get().map(String::as_str)
    }

    /// Shows `stage` from now on.
    fn show(&self, stage: Arc<Stage>) {
        match self.stage.write() {
            Ok(mut current) => *current = stage,
            Err(p) => *p.into_inner() = stage,
        }
    }

    fn of(stage: Stage) -> View {
        View {
            stage: RwLock::new(Arc::new(stage)),
            report: OnceLock::new(),
            failed: OnceLock::new(),
            note: OnceLock::new(),
            details: Mutex::new(None),
            windows: OnceLock::new(),
            window_starts: Mutex::new(std::collections::HashMap::new()),
            window_sources: Mutex::new(HashSet::new()),
        }
    }

    /// The stage now shown.
    fn stage(&self) -> Arc<Stage> {
        match self.stage.read() {
            Ok(s) => Arc::clone(&s),
            Err(p) => Arc::clone(&p.into_inner()),
        }
    }

    /// The stage shown: `index`, `quick` or `full`.
    pub fn stage_name(&self) -> &'static str {
        self.stage().name
    }

    /// Whether the report is there (computed, or from the view index).
    pub fn is_complete(&self) -> bool {
        self.report.get().is_some()
    }

    /// Why the whole trace could not be read, if it could not.
    pub fn failure(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    /// Adds the report (and what depends on it) to the summary.
    fn set_report(&self, report: &gaspard_analyze::profile::Report) {
        let stage = self.stage();
        self.set_report_of(&stage, report);
    }

    /// The summary of `stage` with its report.
    fn set_report_of(&self, stage: &Stage, report: &gaspard_analyze::profile::Report) {
        let mut summary = serde_json::to_value(report).unwrap_or_else(|_| json!({}));
        // The report's blocks hold every epoch; its JSON leaves them out.
        let blocks = &report.blocks;
        let epochs =
            serde_json::to_value(&blocks.epochs[..blocks.epochs.len().min(MAX_BLOCK_EPOCHS)])
                .unwrap_or_default();
        summary["block_epochs"] = epochs;
        summary["block_epochs_total"] = json!(blocks.epochs.len());
        summary["finding_places"] = Value::Array(
            report
                .findings
                .iter()
                .map(|f| place_of(&stage.callsites, &stage.timeline, f))
                .collect(),
        );
        let _ = self.report.set(summary);
    }

    /// The report's part of the summary as JSON text (what the view index
    /// keeps), once known.
    pub fn report_json(&self) -> Option<String> {
        self.report.get().map(Value::to_string)
    }

    /// The core as JSON text: row names, span names, callsites (and the
    /// text of their lines), class names, the time span and the stage
    /// (`index`, `quick` or `full`).
    pub fn core_json(&self) -> String {
        self.stage().core_text.clone()
    }

    /// The summary as JSON text: the core, the report, the block map and the
    /// findings' places; `None` while the report is being computed.
    pub fn summary_json(&self) -> Option<String> {
        let report = self.report.get()?;
        let stage = self.stage();
        Some(
            stage
                .summary
                .get_or_init(|| self.with_core(report, &stage.core).to_string())
                .clone(),
        )
    }

    /// The timeline of `[t0, t1)` at `width` pixels, with the stage it is
    /// of (and `"coarse":true` when it has columns only, from the view
    /// index), as JSON text.
    pub fn timeline_json(&self, t0: u64, t1: u64, width: usize) -> String {
        let stage = self.stage();
        let mut extra = format!("\"stage\":{},", stage.core["stage"]);
        if stage.timeline.coarse {
            if let Some(text) = self.read_window(&stage, t0, t1, width, &extra) {
                return text;
            }
        }
        if stage.timeline.coarse {
            // Columns from the pyramids alone, no spans.
            extra.push_str("\"coarse\":true,");
        }
        stage
            .timeline
            .window_json(t0, t1, width, SPANS_PER_THREAD, &extra)
    }

    /// The timeline of `[t0, t1)` with its spans read from the trace's
    /// chunks that hold them, while the stage has columns only: `None` when
    /// the chunks are not known, or hold more than [`window_events`].
    fn read_window(
        &self,
        stage: &Stage,
        t0: u64,
        t1: u64,
        width: usize,
        extra: &str,
    ) -> Option<String> {
        let windows = self.windows.get()?;
        let rows = stage.timeline.threads.len();
        if windows.len() != rows || windows.events_in(t0, t1) > window_events() {
            return None;
        }
        let w = windows.window(t0, t1)?;
        {
            let mut starts = self.window_starts.lock().unwrap_or_else(|p| p.into_inner());
            if starts.len() > WINDOW_STARTS {
                starts.clear();
            }
            for (row, spans) in w.streams.iter().enumerate() {
                for sp in spans {
                    starts.insert((row, sp.start_event), sp.start);
                }
            }
        }
        self.window_sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(w.callsites.iter().filter_map(|c| c.file.clone()));
        Some(stage.timeline.window_json_read(
            w,
            &windows.ranks(),
            t0,
            t1,
            width,
            SPANS_PER_THREAD,
            extra,
        ))
    }

    /// The time span of the timeline now shown.
    pub fn time_span(&self) -> (u64, u64) {
        let stage = self.stage();
        (stage.timeline.t0, stage.timeline.t1)
    }

    /// One event, decoded, with its callsite and source line; `None` when
    /// there is no such event, or while only the quick scan is there.
    pub fn event_json(&self, row: usize, event: usize) -> Result<Value, Details> {
        let stage = self.stage();
        let (trace, at) = match &stage.trace {
            Some(trace) => (Arc::clone(trace), row),
            None => {
                let trace = self.process_of_row(&stage, row)?;
                let stream = stage.rows[row].1;
                let at = trace.streams.iter().position(|s| s.stream == stream);
                (trace, at.ok_or(Details::NoSuch)?)
            }
        };
        let s = trace.streams.get(at).ok_or(Details::NoSuch)?;
        let e = s.events.get(event).ok_or(Details::NoSuch)?;
        let mut v = gaspard_analyze::dump::event_json(&trace, s, e);
        if stage.trace.is_none() {
            // Its process was read alone: its times are from the process's
            // first event. The span's start is its time in the trace.
            let line = stage.timeline.threads.get(row).ok_or(Details::NoSuch)?;
            let start = match line.spans.iter().find(|sp| sp.event as usize == event) {
                Some(sp) => Some(sp.start),
                // A span of a window read from the trace.
                None => u32::try_from(event).ok().and_then(|e| {
                    let starts = self.window_starts.lock().unwrap_or_else(|p| p.into_inner());
                    starts.get(&(row, e)).copied()
                }),
            };
            // The spans not known yet (columns alone), nor this one read.
            let unknown = if line.spans.is_empty() {
                Details::NotYet
            } else {
                Details::NoSuch
            };
            v["t_ns"] = json!(start.ok_or(unknown)?);
        }
        let site = trace.callsites.get(e.callsite as usize);
        if let Some(c) = site {
            v["file"] = json!(c.file);
            v["line"] = json!(c.line);
            if let Some(text) = c.file.as_deref().and_then(|f| self.source(f)) {
                let l = c.line as usize;
                let lines: Vec<&str> = text.lines().collect();
                if l >= 1 && l <= lines.len() {
                    let from = l.saturating_sub(3);
                    let to = (l + 2).min(lines.len());
                    v["source"] = json!({
                        "first": from + 1,
                        "lines": lines[from..to],
                    });
                }
            }
        }
        v["thread"] = json!(stage.timeline.threads.get(row).map(|t| t.name.clone()));
        Ok(v)
    }

    /// The process of `row` of a quick stage, read alone (the last one read
    /// is kept), if it fits in the memory available.
    fn process_of_row(&self, stage: &Stage, row: usize) -> Result<Arc<Trace>, Details> {
        let Some((process, _)) = stage.rows.get(row) else {
            // An overview's or the view index's: no spans to ask about.
            return Err(if stage.timeline.coarse || stage.rows.is_empty() {
                Details::NotYet
            } else {
                Details::NoSuch
            });
        };
        let mut kept = self.details.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((dir, p, t)) = kept.as_ref() {
            if dir == &stage.dir && p == process {
                return Ok(Arc::clone(t));
            }
        }
        // Let go of the one kept before reading another.
        *kept = None;
        let events = process_events(&stage.dir, process);
        let need = events.saturating_mul(BYTES_PER_EVENT);
        if available_memory().is_some_and(|free| need > free) {
            return Err(Details::Refused(format!(
                "process {process} alone ({events} events) would take about {:.1} GB of memory",
                need as f64 / 1e9
            )));
        }
        let t = gaspard_analyze::trace::read_process(&stage.dir, process)
            .map_err(|e| Details::Refused(e.to_string()))?;
        let t = Arc::new(t);
        *kept = Some((stage.dir.clone(), process.clone(), Arc::clone(&t)));
        Ok(t)
    }

    /// The text of a source file named by one of the trace's callsites
    /// (the stage's, or those of windows read); `None` for any other path
    /// or an unreadable file.
    pub fn source(&self, file: &str) -> Option<String> {
        let stage = self.stage();
        if stage.sources.contains(file) {
            return read_source(&stage.dir, file);
        }
        let named = self
            .window_sources
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(file);
        named.then(|| read_source(&stage.dir, file)).flatten()
    }

    /// The page as served: assets and data come from the server.
    pub fn served_page(&self) -> String {
        PAGE.replace(
            "<!--HEAD-->",
            "<link rel=\"stylesheet\" href=\"/app.css\">\n<script src=\"/app.js\" defer></script>",
        )
        .replace("<!--DATA-->", "")
    }

    /// One self-contained HTML file: style, script, the summary and a
    /// coarse timeline (every span when few enough) inline; no network.
    pub fn html(&self) -> String {
        let stage = self.stage();
        let tl = &stage.timeline;
        let nonce = nonce();
        let rows = tl.threads.len().max(1);
        let columns = (HTML_COLUMN_BYTES / 6 / rows).clamp(64, HTML_COLUMNS);
        let coarse = tl.window_json(tl.t0, tl.t1, columns, (HTML_SPANS / rows).max(20), "");
        let mut summary = match self.report.get() {
            Some(r) => self.with_core(r, &stage.core),
            None => stage.core.clone(),
        };
        if let Some(epochs) = summary["block_epochs"].as_array_mut() {
            epochs.truncate(HTML_BLOCK_EPOCHS);
        }
        let data = format!("{{\"summary\":{summary},\"timeline\":{coarse}}}");
        let csp = format!(
            "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
             img-src data:; base-uri 'none'; form-action 'none'"
        );
        PAGE.replace(
            "<!--HEAD-->",
            &format!(
                "<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n\
                 <style nonce=\"{nonce}\">\n{APP_CSS}</style>"
            ),
        )
        .replace(
            "<!--DATA-->",
            &format!(
                "<script type=\"application/json\" id=\"gaspard-data\">{}</script>\n\
                 <script nonce=\"{nonce}\">\n{}</script>",
                escape_script_json(&data),
                APP_JS.replace("</", "<\\/")
            ),
        )
    }
}

impl Stage {
    /// The stage of a whole trace.
    /// The full stage of a quick stage whose spans are the whole trace's:
    /// the same timeline, its events' details read on demand.
    fn full_of(quick: &Stage) -> Stage {
        let mut stage = Stage::new(
            "full",
            None,
            quick.dir.clone(),
            quick.callsites.clone(),
            Arc::clone(&quick.timeline),
        );
        stage.rows = quick.rows.clone();
        stage.whole = true;
        stage
    }

    fn full(trace: Arc<Trace>, timeline: timeline::Timeline) -> Stage {
        let (dir, callsites) = (trace.dir.clone(), trace.callsites.clone());
        Stage::new("full", Some(trace), dir, callsites, timeline)
    }

    fn new(
        name: &'static str,
        trace: Option<Arc<Trace>>,
        dir: PathBuf,
        callsites: Vec<gaspard_analyze::trace::Callsite>,
        timeline: impl Into<Arc<timeline::Timeline>>,
    ) -> Stage {
        let timeline = timeline.into();
        let sources = callsites.iter().filter_map(|c| c.file.clone()).collect();
        let mut stage = Stage {
            name,
            summary: OnceLock::new(),
            core: Value::Null,
            core_text: String::new(),
            trace,
            dir,
            rows: Vec::new(),
            callsites,
            timeline,
            whole: false,
            sources,
        };
        let mut core = json!({
            "rows": stage.timeline.threads.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
            "classes": timeline::CLASSES,
            "names": stage.timeline.names,
            "sites": stage
                .callsites
                .iter()
                .map(|c| json!([c.file, c.line]))
                .collect::<Vec<_>>(),
            "span": [stage.timeline.t0, stage.timeline.t1],
            "stage": name,
        });
        core["site_lines"] = stage.site_lines();
        stage.core_text = core.to_string();
        stage.core = core;
        stage
    }

    /// The text of each callsite's line (the HTML file shows it without the
    /// server), `null` where the file cannot be read.
    fn site_lines(&self) -> Value {
        let mut files: std::collections::HashMap<&str, Option<Vec<String>>> =
            std::collections::HashMap::new();
        let mut out = Vec::with_capacity(self.callsites.len().min(MAX_SITE_LINES));
        for c in self.callsites.iter().take(MAX_SITE_LINES) {
            let line = c.file.as_deref().and_then(|f| {
                let text = files.entry(f).or_insert_with(|| {
                    self.source(f)
                        .map(|t| t.lines().map(|l| l.chars().take(300).collect()).collect())
                });
                text.as_ref()?
                    .get((c.line as usize).checked_sub(1)?)
                    .cloned()
            });
            out.push(json!(line));
        }
        Value::Array(out)
    }

    /// The text of a source file named by one of the stage's callsites.
    fn source(&self, file: &str) -> Option<String> {
        if !self.sources.contains(file) {
            return None;
        }
        read_source(&self.dir, file)
    }
}

/// The text of `file`, a callsite's file of the trace in `dir` (a relative
/// path from where the program ran, taken to be `dir`'s parent), if it is
/// a readable file of 4 MiB at most.
fn read_source(dir: &Path, file: &str) -> Option<String> {
    let p = Path::new(file);
    let candidates: Vec<PathBuf> = if p.is_absolute() {
        vec![p.to_path_buf()]
    } else {
        let mut v = vec![p.to_path_buf()];
        if let Some(parent) = dir.parent() {
            v.push(parent.join(p));
        }
        v
    };
    candidates.iter().find_map(|c| {
        let meta = std::fs::metadata(c).ok()?;
        if !meta.is_file() || meta.len() > 4 << 20 {
            return None;
        }
        std::fs::read_to_string(c).ok()
    })
}

/// The report's summary with a stage's core.
fn with_core(report: &Value, core: &Value) -> Value {
    let mut summary = report.clone();
    if let (Some(m), Some(core)) = (summary.as_object_mut(), core.as_object()) {
        for (k, v) in core {
            m.insert(k.clone(), v.clone());
        }
    }
    summary
}

/// The stage of a quick scan of the trace in `dir`, and the events read.
fn quick_stage(dir: &Path) -> Result<(Stage, u64), TraceError> {
    let mut quick = gaspard_analyze::scan::scan(dir)?;
    let events = quick.events();
    let callsites = std::mem::take(&mut quick.callsites);
    let rows = quick
        .streams
        .iter()
        .map(|s| (s.process.clone(), s.stream))
        .collect();
    let whole = quick.is_whole(dir);
    let timeline = timeline::Timeline::from_quick(quick);
    let mut stage = Stage::new("quick", None, dir.to_path_buf(), callsites, timeline);
    stage.rows = rows;
    stage.whole = whole;
    Ok((stage, events))
}

/// Bytes of stream files from which a view opens with an overview
/// ([`overview_stage`]) rather than the quick scan: about 7 M events of
/// `bench/gen_trace.c` (4.6 bytes each), whose quick scan takes about half
/// a second on two cores (`GASPARD_VIEW_OVERVIEW_BYTES` sets it).
fn overview_bytes() -> u64 {
    std::env::var("GASPARD_VIEW_OVERVIEW_BYTES")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_OVERVIEW_BYTES)
}

const DEFAULT_OVERVIEW_BYTES: u64 = 32 << 20;

/// The stage of an overview of the trace in `dir` (each thread's busy time
/// per class, columns alone), and the events read; `None` if it gives no
/// timeline.
fn overview_stage(
    dir: &Path,
) -> Result<Option<(Stage, u64, gaspard_analyze::scan::Windows)>, TraceError> {
    let mut o = gaspard_analyze::scan::overview(
        dir,
        timeline::FINEST_BINS,
        timeline::CLASSES.len(),
        timeline::Timeline::overview_class,
    )?;
    let events = o.streams.iter().map(|s| s.events).sum();
    let windows = std::mem::take(&mut o.windows);
    Ok(timeline::Timeline::from_overview(o).map(|timeline| {
        let mut stage = Stage::new("overview", None, dir.to_path_buf(), Vec::new(), timeline);
        stage.rows = windows.rows();
        (stage, events, windows)
    }))
}

/// What a view does in the background after it is opened.
struct Background {
    dir: PathBuf,
    /// `dir`, canonical (the view index is made for it).
    canonical: PathBuf,
    /// The trace's files when it was opened, if they could be listed.
    fingerprint: Option<Vec<index::FileStamp>>,
    block_size: u64,
    /// Whether to write the view index from the quick stage.
    write_quick: bool,
    /// Whether to write it from the full stage, with the report.
    write_full: bool,
}

impl Background {
    /// Runs in a thread of its own: the quick scan unless `quick_events`
    /// says it is done, then the whole trace (if it fits in memory).
    fn spawn(self, view: &Arc<View>, quick_events: Option<u64>) {
        let view = Arc::clone(view);
        std::thread::spawn(move || {
            // Threads of lower priority than the server's, so that the page
            // stays fluid meanwhile.
            let pool = rayon::ThreadPoolBuilder::new()
                .thread_name(|i| format!("gaspard-read-{i}"))
                .start_handler(|_| lower_priority())
                .build();
            let work = std::panic::AssertUnwindSafe(|| match &pool {
                Ok(pool) => pool.install(|| self.run(&view, quick_events)),
                Err(_) => self.run(&view, quick_events),
            });
            if let Err(p) = std::panic::catch_unwind(work) {
                let why = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                let _ = view.failed.set(format!("the analysis stopped: {why}"));
            }
        });
    }

    fn run(&self, view: &View, quick_events: Option<u64>) {
        // The view index is written from the quick scan's timeline (not from
        // an overview's).
        if self.write_quick && quick_events.is_some() {
            self.save(view, &view.stage(), None);
        }
        // GASPARD_VIEW_DELAY_MS holds the first stage that long (to look at
        // it, or test it, on a small trace).
        if let Some(ms) = std::env::var("GASPARD_VIEW_DELAY_MS")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            std::thread::sleep(std::time::Duration::from_millis(ms.min(600_000)));
        }
        let events = match quick_events {
            Some(n) => n,
            None => match quick_stage(&self.dir) {
                Ok((stage, events)) => {
                    let stage = Arc::new(stage);
                    // Said before the stage's summary is asked for (unless
                    // the whole trace is not needed).
                    if !stage.whole {
                        view.too_big(events);
                    }
                    view.show(Arc::clone(&stage));
                    if self.write_quick && self.fingerprint.is_some() {
                        self.save(view, &stage, None);
                    }
                    events
                }
                Err(e) => {
                    let _ = view.failed.set(e.to_string());
                    return;
                }
            },
        };
        let quick = view.stage();
        if quick.whole {
            // Reading the whole trace would give the same timeline: the
            // report is computed one process at a time (less memory, sooner).
            let full = Arc::new(Stage::full_of(&quick));
            view.show(Arc::clone(&full));
            view.report_by_process(&self.dir, self.block_size);
            if self.write_full && view.report.get().is_some() {
                self.save(view, &full, view.report_json());
            }
            return;
        }
        if view.too_big(events) {
            view.report_by_process(&self.dir, self.block_size);
            if self.write_full && view.report.get().is_some() {
                self.save(view, &view.stage(), view.report_json());
            }
            return;
        }
        if let Some(stage) = view.read_whole(&self.dir, self.block_size) {
            if self.write_full {
                self.save(view, &stage, view.report_json());
            }
        }
    }

    /// Writes the view index of `stage`, with the report's summary if known.
    fn save(&self, view: &View, stage: &Stage, summary: Option<String>) {
        let Some(fingerprint) = &self.fingerprint else {
            return;
        };
        let ix = index::Index::of(
            fingerprint.clone(),
            self.block_size,
            &stage.timeline,
            &stage.callsites,
            summary,
            view.windows.get().map(|w| w.to_bytes()),
        );
        index::save(&self.canonical, &ix);
    }
}

/// JSON text made safe inside a `<script>` element: no `<`, `>`, `&` or
/// line separators left as such (they are the same characters to JSON).
pub fn escape_script_json(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    for c in s.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Lowers the calling thread's scheduling priority (nice 10).
fn lower_priority() {
    // SAFETY: setpriority has no memory effects; on Linux, PRIO_PROCESS with
    // id 0 names the calling thread only.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, 10);
    }
}

/// Memory the whole trace and its report take, per event, about (peak of
/// `gaspard report`, see BENCHMARKS.md), with the view's timelines.
const BYTES_PER_EVENT: u64 = 128;

/// Memory the view may use for the whole trace: `GASPARD_VIEW_MEMORY`
/// bytes if set, else what the system has available for new work
/// (`MemAvailable`), if it says.
fn available_memory() -> Option<u64> {
    if let Some(v) = std::env::var("GASPARD_VIEW_MEMORY")
        .ok()
        .and_then(|v| v.trim().parse().ok())
    {
        return Some(v);
    }
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Why the details of an event are not given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Details {
    /// No such row or event.
    NoSuch,
    /// The stage shown has no spans to ask about yet.
    NotYet,
    /// Its process cannot be read (too big for the memory available, or
    /// unreadable): why.
    Refused(String),
}

/// The events the chunk headers of the stream files of `process` in `dir`
/// announce.
fn process_events(dir: &Path, process: &str) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "gst"))
        .filter(|p| {
            p.file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.rsplit_once('-'))
                .is_some_and(|(p, n)| p == process && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|p| gaspard_format::stream::announced_events(&p).ok())
        .sum()
}

/// A fresh value for the page's Content-Security-Policy nonce.
fn nonce() -> String {
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes = (t ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where the timeline shows a finding: the longest span of one of its
/// threads at its source line (or the whole run of its first thread).
fn place_of(
    callsites: &[gaspard_analyze::trace::Callsite],
    tl: &timeline::Timeline,
    f: &gaspard_analyze::findings::Finding,
) -> Value {
    let rows: Vec<usize> = tl
        .threads
        .iter()
        .enumerate()
        .filter(|(_, th)| f.threads.contains(&th.name))
        .map(|(i, _)| i)
        .collect();
    let at_line = |site: u32| {
        let Some(loc) = &f.location else {
            return false;
        };
        callsites.get(site as usize).is_some_and(|c| {
            c.line == loc.line
                && c.file.as_deref().is_some_and(|file| {
                    file == loc.file || file.ends_with(&format!("/{}", loc.file))
                })
        })
    };
    let mut best: Option<(usize, &timeline::Span)> = None;
    for &r in &rows {
        for sp in &tl.threads[r].spans {
            if at_line(sp.site) && best.is_none_or(|(_, b)| sp.end - sp.start > b.end - b.start) {
                best = Some((r, sp));
            }
        }
    }
    match best {
        Some((r, sp)) => json!({"row": r, "t0": sp.start, "t1": sp.end, "event": sp.event}),
        None => json!({
            "row": rows.first().copied(),
            "t0": tl.t0,
            "t1": tl.t1,
            "event": null,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_in_a_script_element() {
        let s = escape_script_json("{\"a\":\"</script><img src=x onerror=1>&\u{2028}\"}");
        assert!(!s.contains(['<', '>', '&', '\u{2028}']));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["a"], "</script><img src=x onerror=1>&\u{2028}");
    }

    #[test]
    fn nonces_differ() {
        assert_ne!(nonce(), nonce());
        assert_eq!(nonce().len(), 32);
    }
}
