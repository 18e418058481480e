//! The least a reader of gaspard's traces can do per event, on one thread:
//! how fast the format's own decoder walks every event of a trace directory
//! with nothing kept (with and without decoding the events' argument words),
//! with every event and its words kept in windows of 8,192 (as a reader
//! handing events to passes over them must), and with the least profile on
//! top (per stream, a stack of starts and per kind, user event and callsite
//! a count and a sum of durations). What `gaspard report` costs per event
//! beyond these is the analyses' share.
//! Used by `bench/analysis.sh`.
//!
//!   cargo run --release -p gaspard-format --example read_floor -- DIR [REPEATS [PASS]]
//!
//! PASS (`decode`, `decode+args`, `decode+keep` or `decode+least_profile`)
//! runs that pass alone (for `valgrind --tool=callgrind`).
//! Prints one line per pass: `pass=NAME events=N median_s=S ns_per_event=X`.

use gaspard_format::codec::{self, Callsite, Event, Sink, UserDef};
use gaspard_format::raw::{PHASE_END, PHASE_START};
use rustc_hash::FxHashMap;
use std::time::Instant;

/// Counts events and sums their timestamps (so that nothing is optimized
/// away), keeping nothing; with `ARGS`, has every event's argument words
/// decoded too, and sums them.
#[derive(Default)]
struct Nothing<const ARGS: bool> {
    events: u64,
    ts_sum: u64,
}

impl<const ARGS: bool> Sink for Nothing<ARGS> {
    fn string(&mut self, _: u32, _: String) {}
    fn callsite(&mut self, _: u32, _: Callsite) {}
    fn user(&mut self, _: UserDef) {}
    #[inline(always)]
    fn event(&mut self, e: Event, _: Option<u64>, words: &[u64]) {
        self.events += 1;
        self.ts_sum = self.ts_sum.wrapping_add(e.ts);
        if ARGS {
            for w in words {
                self.ts_sum = self.ts_sum.wrapping_add(*w);
            }
        }
    }
    #[inline(always)]
    fn wants_args(&mut self, _: u16) -> bool {
        ARGS
    }
}

/// Events per window of [`Keep`] (as `gaspard report` reads them).
const WINDOW: usize = 8192;

/// Keeps every event and its argument words, as a reader handing events to
/// passes over them must, in windows of [`WINDOW`] events (the vectors used
/// again from window to window).
#[derive(Default)]
struct Keep {
    events: Vec<Event>,
    args: Vec<u64>,
    /// Events of the windows before, and a sum of their last times.
    before: u64,
    ts_sum: u64,
}

impl Sink for Keep {
    fn string(&mut self, _: u32, _: String) {}
    fn callsite(&mut self, _: u32, _: Callsite) {}
    fn user(&mut self, _: UserDef) {}
    #[inline(always)]
    fn event(&mut self, mut e: Event, user: Option<u64>, words: &[u64]) {
        if self.events.len() == WINDOW {
            self.next_window();
        }
        e.args_start = self.args.len() as u32;
        if let Some(u) = user {
            self.args.push(u);
        }
        codec::push_words(&mut self.args, words);
        e.nargs = self.args.len() as u32 - e.args_start;
        self.events.push(e);
    }
    #[inline(always)]
    fn wants_args(&mut self, _: u16) -> bool {
        true
    }
}

impl Keep {
    #[cold]
    fn next_window(&mut self) {
        self.before += self.events.len() as u64;
        let last = self.events.last().map_or(0, |e| e.ts);
        self.ts_sum = self.ts_sum.wrapping_add(last);
        self.events.clear();
        self.args.clear();
    }
}

/// The least profile: begin/end pairs matched on a stack, a count and a sum
/// of durations per (kind, user event, callsite).
#[derive(Default)]
struct LeastProfile {
    events: u64,
    stack: Vec<(u16, u64, u32, u64)>,
    stats: FxHashMap<(u16, u64, u32), (u64, u64)>,
}

impl Sink for LeastProfile {
    fn string(&mut self, _: u32, _: String) {}
    fn callsite(&mut self, _: u32, _: Callsite) {}
    fn user(&mut self, _: UserDef) {}
    #[inline(always)]
    fn event(&mut self, e: Event, user: Option<u64>, _: &[u64]) {
        self.events += 1;
        let u = user.unwrap_or(u64::MAX);
        match e.phase {
            PHASE_START => self.stack.push((e.kind, u, e.callsite, e.ts)),
            PHASE_END => {
                if let Some((k, u, site, t0)) = self.stack.pop() {
                    let s = self.stats.entry((k, u, site)).or_default();
                    s.0 += 1;
                    s.1 += e.ts.saturating_sub(t0);
                }
            }
            _ => self.stats.entry((e.kind, u, e.callsite)).or_default().0 += 1,
        }
    }
    #[inline(always)]
    fn wants_args(&mut self, _: u16) -> bool {
        false
    }
}

fn pass<S: Default + Sink>(files: &[(String, Vec<u8>)], count: impl Fn(&S) -> u64) -> u64 {
    let mut events = 0;
    for (name, data) in files {
        let mut sink = S::default();
        let walked = gaspard_format::stream::walk(name, data, |h, payload| {
            codec::decode_into(h, payload, &mut sink)
        });
        if let Err(e) = walked {
            eprintln!("read_floor: {name}: {e}");
            std::process::exit(1);
        }
        events += count(&sink);
        std::hint::black_box(&sink);
    }
    events
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: read_floor DIR [REPEATS [PASS]]");
        std::process::exit(2);
    };
    let repeats: usize = args.get(2).and_then(|r| r.parse().ok()).unwrap_or(5);
    let mut files = Vec::new();
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
        eprintln!("read_floor: {dir}: {e}");
        std::process::exit(1);
    });
    for e in entries.flatten() {
        let p = e.path();
        if p.extension().is_some_and(|x| x == "gst") {
            match std::fs::read(&p) {
                Ok(d) => files.push((p.display().to_string(), d)),
                Err(e) => {
                    eprintln!("read_floor: {}: {e}", p.display());
                    std::process::exit(1);
                }
            }
        }
    }
    files.sort();
    type Run<'a> = (&'a str, Box<dyn Fn() -> u64 + 'a>);
    let runs: [Run; 4] = [
        (
            "decode",
            Box::new(|| pass::<Nothing<false>>(&files, |s| s.events)),
        ),
        (
            "decode+args",
            Box::new(|| pass::<Nothing<true>>(&files, |s| s.events)),
        ),
        (
            "decode+keep",
            Box::new(|| pass::<Keep>(&files, |s| s.before + s.events.len() as u64)),
        ),
        (
            "decode+least_profile",
            Box::new(|| pass::<LeastProfile>(&files, |s| s.events)),
        ),
    ];
    let only = args.get(3);
    if only.is_some_and(|o| runs.iter().all(|(name, _)| name != o)) {
        eprintln!("read_floor: no pass named {}", only.unwrap());
        std::process::exit(2);
    }
    for (name, run) in runs.iter().filter(|(n, _)| only.is_none_or(|o| o == n)) {
        let mut times = Vec::new();
        let mut events = 0;
        for _ in 0..repeats {
            let t = Instant::now();
            events = run();
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        println!(
            "pass={name} events={events} median_s={median:.4} ns_per_event={:.2}",
            median * 1e9 / events.max(1) as f64
        );
    }
}
