//! The clock: the TSC where it is invariant, else CLOCK_MONOTONIC.

use std::sync::atomic::{AtomicU64, Ordering};

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; it is async-signal-safe.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
pub(crate) fn realtime_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as above.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The recording clock, in its own ticks.
pub fn now_ticks() -> u64 {
    // SAFETY: a plain C function reading the clock.
    unsafe { crate::gaspard_clock_now() }
}

/// Whether the TSC can serve as the clock: invariant (constant and nonstop),
/// unless `GASPARD_CLOCK=monotonic` says otherwise.
pub(crate) fn choose_tsc(requested: Option<&str>) -> bool {
    if !cfg!(any(target_arch = "x86_64", target_arch = "x86")) || requested == Some("monotonic") {
        return false;
    }
    // The first CPU's flags are enough: reading no further spares the kernel
    // from describing every CPU of a big machine, in every recorded process.
    use std::io::BufRead;
    let Ok(f) = std::fs::File::open("/proc/cpuinfo") else {
        return false;
    };
    std::io::BufReader::new(f)
        .lines()
        .map_while(Result::ok)
        .find(|l| l.starts_with("flags"))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.contains(&"constant_tsc") && f.contains(&"nonstop_tsc")
        })
        .unwrap_or(false)
}

pub(crate) fn set_tsc(on: bool) {
    // SAFETY: written once at process start, before any context exists.
    unsafe { crate::gaspard_clock_is_tsc = i32::from(on) };
}

pub(crate) fn is_tsc() -> bool {
    // SAFETY: read of an int written once at start.
    unsafe { crate::gaspard_clock_is_tsc != 0 }
}

static REF_TICKS: AtomicU64 = AtomicU64::new(0);
static REF_NS: AtomicU64 = AtomicU64::new(0);
static PER_US_X1000: AtomicU64 = AtomicU64::new(0);

pub(crate) fn set_reference(ticks: u64, ns: u64) {
    REF_TICKS.store(ticks, Ordering::Relaxed);
    REF_NS.store(ns, Ordering::Relaxed);
}

/// Clock ticks per microsecond (1000 for the monotonic clock), measured
/// against CLOCK_MONOTONIC since the process started recording.
pub fn ticks_per_us() -> f64 {
    if !is_tsc() {
        return 1000.0;
    }
    let cached = PER_US_X1000.load(Ordering::Relaxed);
    if cached != 0 {
        return cached as f64 / 1000.0;
    }
    let (t0, n0) = (
        REF_TICKS.load(Ordering::Relaxed),
        REF_NS.load(Ordering::Relaxed),
    );
    let (mut t1, mut n1) = monotonic_pair();
    if n0 == 0 || n1.saturating_sub(n0) < 2_000_000 {
        // Too little time has passed to be precise: measure 2 ms now.
        let (s0, m0) = monotonic_pair();
        while monotonic_ns() - m0 < 2_000_000 {
            std::hint::spin_loop();
        }
        (t1, n1) = monotonic_pair();
        let r = (t1 - s0) as f64 * 1000.0 / (n1 - m0) as f64;
        return r;
    }
    let r = (t1 - t0) as f64 * 1000.0 / (n1 - n0) as f64;
    if n1 - n0 > 100_000_000 {
        PER_US_X1000.store((r * 1000.0) as u64, Ordering::Relaxed);
    }
    r
}

/// How many times [`reference_pair`] reads the two clocks.
const PAIR_TRIES: usize = 5;

/// The recording clock's ticks and `read()` (a time in ns) taken together:
/// the time read between two tick reads, a few times, keeping the tightest
/// bracket and its middle. A thread descheduled between two plain reads (on
/// a machine with more threads than cores) would pair a tick count with a
/// time read milliseconds later, and every time converted through that
/// reference would be off by as much.
fn bracketed(read: impl Fn() -> u64) -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..PAIR_TRIES {
        let a = now_ticks();
        let ns = read();
        let b = now_ticks();
        let gap = b.wrapping_sub(a);
        if gap < best.0 {
            best = (gap, a + gap / 2, ns);
        }
    }
    (best.1, best.2)
}

/// A clock reference, as the trace states it: ticks and [`reference_ns`]
/// read together (see [`bracketed`]).
pub fn reference_pair() -> (u64, u64) {
    bracketed(reference_ns)
}

/// Ticks and CLOCK_MONOTONIC read together, to measure the tick rate from.
pub(crate) fn monotonic_pair() -> (u64, u64) {
    bracketed(monotonic_ns)
}

/// An artificial error of this process's clock, for testing clock
/// synchronization (`GASPARD_CLOCK_SKEW_NS`, `GASPARD_CLOCK_DRIFT_PPM`):
/// nanoseconds added, and parts per billion of the time since `SKEW_FROM`.
static SKEW_NS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
static DRIFT_PPB: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
static SKEW_FROM: AtomicU64 = AtomicU64::new(0);

/// Makes this process's clock wrong on purpose by `skew_ns` plus `drift_ppm`
/// parts per million of the time elapsed since now.
static SYNC_ALL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Every process measures its clock against the reference's
/// (`GASPARD_CLOCK_SYNC_ALL=1`), those of its machine too.
pub(crate) fn set_sync_all(all: bool) {
    SYNC_ALL.store(all, Ordering::Relaxed);
}

/// The clock this process's times come from, as the adapters' clock
/// synchronization compares it with the reference process's: the running
/// kernel's boot id (processes of one running kernel read one clock, the
/// TSC or CLOCK_MONOTONIC, so that measuring their offsets would only add
/// the measurements' error). `None` when this process measures its offset
/// whatever the reference's: an artificial error is set (see [`set_skew`]),
/// `GASPARD_CLOCK_SYNC_ALL=1`, or the boot id is unknown.
pub(crate) fn domain() -> Option<String> {
    if SYNC_ALL.load(Ordering::Relaxed)
        || SKEW_NS.load(Ordering::Relaxed) != 0
        || DRIFT_PPB.load(Ordering::Relaxed) != 0
    {
        return None;
    }
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty()).then(|| id.to_string())
}

pub(crate) fn set_skew(skew_ns: i64, drift_ppm: f64) {
    SKEW_FROM.store(monotonic_ns(), Ordering::Relaxed);
    SKEW_NS.store(skew_ns, Ordering::Relaxed);
    DRIFT_PPB.store((drift_ppm * 1000.0) as i64, Ordering::Relaxed);
}

/// The process's time in nanoseconds, as its trace states it: the time of
/// every clock reference (ticks to nanoseconds) and of clock
/// synchronizations. CLOCK_MONOTONIC, plus the artificial error if one is set.
pub fn reference_ns() -> u64 {
    let m = monotonic_ns();
    let skew = SKEW_NS.load(Ordering::Relaxed);
    let ppb = DRIFT_PPB.load(Ordering::Relaxed);
    if skew == 0 && ppb == 0 {
        return m;
    }
    let since = m.saturating_sub(SKEW_FROM.load(Ordering::Relaxed)) as i128;
    (m as i128 + skew as i128 + since * ppb as i128 / 1_000_000_000).max(0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_pair_is_read_between_its_brackets() {
        for _ in 0..100 {
            let (t0, n0) = (now_ticks(), reference_ns());
            let (t, n) = reference_pair();
            let (t1, n1) = (now_ticks(), reference_ns());
            assert!(t0 <= t && t <= t1, "{t0} {t} {t1}");
            assert!(n0 <= n && n <= n1, "{n0} {n} {n1}");
        }
        // The tightest of the tries: a read made slow on purpose (10 ms) once is
        // not the one kept.
        let calls = std::cell::Cell::new(0);
        let (t, _) = bracketed(|| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            monotonic_ns()
        });
        assert_eq!(calls.get(), PAIR_TRIES);
        let after = now_ticks();
        // Kept from a later try: the first one's middle is 5 ms before now.
        assert!(
            after - t < (ticks_per_us() * 2000.0) as u64,
            "{}",
            after - t
        );
    }
}
