//! Clock synchronization between processes.
//!
//! Processes on different machines (or with an artificial error, see
//! `GASPARD_CLOCK_SKEW_NS`) do not share one clock. The MPI and OpenSHMEM
//! adapters measure, right after initialization and right before
//! finalization, each process's offset from the reference process (rank or
//! PE 0) by Cristian's algorithm: of a few round trips to the reference, the
//! shortest is kept, and the reference's time is taken to be that of the
//! middle of the round trip. Each measurement is a `GASPARD_CLOCK_SYNC` event
//! (local send time, reference time, local receive time, in nanoseconds of
//! each process's own clock).
//!
//! From the first and the last measurement the reader takes the offset
//! `o(t) = a + b·t` of the process's clock as a linear function of its own
//! time (an offset and a drift) and moves every event of the process to
//! `t - o(t)`, the reference's time. With one measurement the drift is 0.
//! The error of each measurement is at most half its round trip.

use gaspard_format::kinds;

use crate::trace::Stream;

/// One measurement: the process's offset from the reference at a local time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Sample {
    /// Local time (middle of the round trip), absolute nanoseconds of the process's clock.
    pub local_ns: u64,
    /// Local time minus the reference's, in nanoseconds.
    pub offset_ns: f64,
    /// The round trip, in nanoseconds: the measurement is within half of it.
    pub rtt_ns: u64,
    /// The reference's rank or PE.
    pub root: i64,
}

/// The correction applied to one process's times.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Correction {
    /// `host-pid` of the process.
    pub process: String,
    /// The first and last measurements.
    pub first: Sample,
    /// The last measurement (the same as `first` when there is only one).
    pub last: Sample,
    /// Measurements the process made.
    pub samples: usize,
    /// The drift, in parts per million: how much faster than the reference's
    /// the process's clock runs.
    pub drift_ppm: f64,
}

impl Correction {
    /// The offset of the process's clock at its local time `t` (absolute ns).
    pub fn offset_at(&self, t: u64) -> f64 {
        self.first.offset_ns + (t as f64 - self.first.local_ns as f64) * self.drift_ppm * 1e-6
    }

    /// Whether a later time is never made an earlier one by
    /// [`Correction::correct`] (a drift below 10 %; a clock measured
    /// drifting more is damaged).
    pub fn keeps_order(&self) -> bool {
        self.drift_ppm.is_finite() && self.drift_ppm < 1e5 && self.first.offset_ns.is_finite()
    }

    /// `t` (absolute ns of the process's clock) in the reference's time.
    pub fn correct(&self, t: u64) -> u64 {
        (t as f64 - self.offset_at(t)).max(0.0).round() as u64
    }
}

fn ms(ns: f64) -> String {
    format!("{:+.3} ms", ns / 1e6)
}

/// One line saying how a process's clock was corrected.
pub fn describe(c: &Correction) -> String {
    format!(
        "process {}: clock {} from rank {}'s at the start, {} at the end (drift {:+.2} ppm, {} measurements, \
         round trips {:.1} and {:.1} us){}",
        c.process,
        ms(c.first.offset_ns),
        c.first.root,
        ms(c.last.offset_ns),
        c.drift_ppm,
        c.samples,
        c.first.rtt_ns as f64 / 1e3,
        c.last.rtt_ns as f64 / 1e3,
        if enabled() {
            ": its times are corrected"
        } else {
            ": not corrected (GASPARD_NO_CLOCK_SYNC)"
        }
    )
}

/// The correction as JSON.
pub fn to_json(c: &Correction) -> serde_json::Value {
    serde_json::json!({
        "process": c.process,
        "root": c.first.root,
        "offset_start_ns": c.first.offset_ns,
        "offset_end_ns": c.last.offset_ns,
        "drift_ppm": c.drift_ppm,
        "samples": c.samples,
        "rtt_start_ns": c.first.rtt_ns,
        "rtt_end_ns": c.last.rtt_ns,
        "applied": enabled(),
    })
}

/// The measurements of one process's streams, in time order.
pub fn samples<'a>(streams: impl Iterator<Item = &'a Stream>) -> Vec<Sample> {
    samples_of(streams.flat_map(|s| {
        s.events
            .iter()
            .filter(|e| e.kind == kinds::GASPARD_CLOCK_SYNC)
            .map(move |e| s.args(e))
    }))
}

/// The measurements given by the arguments of `GASPARD_CLOCK_SYNC` events,
/// in time order.
pub fn samples_of<'a>(args: impl Iterator<Item = &'a [u64]>) -> Vec<Sample> {
    let mut v: Vec<Sample> = args
        .filter(|a| a.len() >= 4)
        .filter_map(|a| {
            let (root, send, remote, recv) = (a[0] as i64, a[1], a[2], a[3]);
            // A clock that could not be read (0), or time going backwards: no measurement.
            if send == 0 || remote == 0 || recv < send {
                return None;
            }
            let mid = send + (recv - send) / 2;
            Some(Sample {
                local_ns: mid,
                offset_ns: mid as f64 - remote as f64,
                rtt_ns: recv - send,
                root,
            })
        })
        .collect();
    v.sort_by_key(|s| s.local_ns);
    v
}

/// The correction of a process from its measurements; `None` without any.
pub fn correction(process: &str, samples: &[Sample]) -> Option<Correction> {
    let (first, last) = (*samples.first()?, *samples.last()?);
    let span = last.local_ns.saturating_sub(first.local_ns);
    // Below a millisecond apart, the drift is not to be told from the noise.
    let drift_ppm = if span >= 1_000_000 {
        (last.offset_ns - first.offset_ns) / span as f64 * 1e6
    } else {
        0.0
    };
    Some(Correction {
        process: process.to_string(),
        first,
        last,
        samples: samples.len(),
        drift_ppm,
    })
}

/// Computes the correction of every process that measured its clock, and
/// moves its events (absolute nanoseconds) to the reference's time.
/// `GASPARD_NO_CLOCK_SYNC=1` in the reader's environment leaves the times
/// as recorded (the corrections are still computed and shown).
pub fn apply(streams: &mut [Stream]) -> Vec<Correction> {
    let mut names: Vec<String> = streams.iter().map(|s| s.process.clone()).collect();
    names.sort();
    names.dedup();
    let fix = enabled();
    let mut out = Vec::new();
    for name in names {
        let s = samples(streams.iter().filter(|s| s.process == name));
        let Some(c) = correction(&name, &s) else {
            continue;
        };
        if fix {
            for st in streams.iter_mut().filter(|s| s.process == name) {
                for e in &mut st.events {
                    e.t_ns = c.correct(e.t_ns);
                }
                st.events_changed();
            }
        }
        out.push(c);
    }
    out
}

/// Whether the reader applies the corrections (see [`apply`]).
pub fn enabled() -> bool {
    std::env::var("GASPARD_NO_CLOCK_SYNC").map_or(true, |v| v.is_empty() || v == "0")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(local: u64, offset: f64) -> Sample {
        Sample {
            local_ns: local,
            offset_ns: offset,
            rtt_ns: 10,
            root: 0,
        }
    }

    #[test]
    fn offset_and_drift_are_undone() {
        // A clock 50 ms ahead that gains 100 ppm.
        let true_t = |t: f64| t;
        let skewed = |t: f64| t + 50e6 + (t - 1e9) * 100e-6;
        let s0 = sample(skewed(1e9) as u64, skewed(1e9) - true_t(1e9));
        let s1 = sample(skewed(3e9) as u64, skewed(3e9) - true_t(3e9));
        let c = correction("p", &[s0, s1]).unwrap();
        assert!((c.drift_ppm - 100.0).abs() < 0.1, "{}", c.drift_ppm);
        let t = 2.5e9;
        let back = c.correct(skewed(t) as u64) as f64;
        assert!((back - t).abs() < 2.0, "{back} vs {t}");
    }

    fn event(t_ns: u64, kind: u16, args: Vec<u64>) -> (crate::trace::Event, Vec<u64>) {
        let e = crate::trace::Event {
            t_ns,
            kind,
            phase: 2,
            flags: 0,
            callsite: 0,
            args_at: 0,
            nargs: 0,
            text: crate::trace::NO_TEXT,
            user: crate::trace::NO_USER,
        };
        (e, args)
    }

    fn stream(process: &str, events: Vec<(crate::trace::Event, Vec<u64>)>) -> Stream {
        let mut s = Stream::empty(process, 0, 3, 16);
        for (mut e, a) in events {
            (e.args_at, e.nargs) = s.keep_args(&a);
            s.events.push(e);
        }
        s
    }

    #[test]
    fn apply_moves_only_the_processes_that_measured() {
        let sync = |send: u64, remote: u64, recv: u64| {
            event(
                recv,
                kinds::GASPARD_CLOCK_SYNC,
                vec![0, send, remote, recv, 0],
            )
        };
        // Process b is 1000 ns ahead: its round trips of 20 ns find it.
        let mut streams = vec![
            stream("a", vec![event(5_000, 1, vec![])]),
            stream(
                "b",
                vec![
                    sync(11_000, 10_010, 11_020),
                    event(16_000, 1, vec![]),
                    sync(21_000, 20_010, 21_020),
                    sync(21_000, 21_000, 20_000), // time going backwards: left out
                    sync(0, 20_010, 21_020),      // an unread clock: left out
                ],
            ),
        ];
        let c = apply(&mut streams);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].process.as_str(), c[0].samples), ("b", 2));
        assert_eq!(c[0].drift_ppm, 0.0);
        assert_eq!(streams[0].events[0].t_ns, 5_000);
        let moved = if enabled() { 15_000 } else { 16_000 };
        assert_eq!(streams[1].events[1].t_ns, moved);
    }

    #[test]
    fn one_sample_is_an_offset() {
        let c = correction("p", &[sample(5_000, 1_000.0)]).unwrap();
        assert_eq!(c.drift_ppm, 0.0);
        assert_eq!(c.correct(9_000), 8_000);
        assert!(correction("p", &[]).is_none());
    }
}
