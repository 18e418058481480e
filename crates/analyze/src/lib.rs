//! Reading gaspard traces and computing what they say.
//!
//! [`trace`] reads a trace directory: manifests, stream files, damaged
//! chunks included, with every problem named. [`dump`] turns events into
//! text and JSON; [`profile`] computes the per-event, per-callsite and
//! per-thread report.
#![warn(missing_docs, missing_debug_implementations)]

pub mod balance;
pub mod blocks;
pub mod caf;
pub mod clocksync;
pub mod compare;
pub mod distributed;
pub mod dump;
pub mod epochs;
pub mod findings;
pub mod intervals;
pub mod locks;
pub mod matrix;
pub mod objects;
pub mod pairs;
pub mod profile;
pub mod progress;
pub mod scan;
mod shape;
pub mod summary;
pub mod symbolize;
pub mod trace;
pub mod waitstates;
pub(crate) mod window;

/// `n` and the noun `one` (`1 thread`), or `many` for any other count
/// (`2 threads`, `0 threads`): the text reports' counts.
pub(crate) fn count(n: impl Into<u64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}"),
        n => format!("{n} {many}"),
    }
}

/// [`count`] as the owner of what follows: `1 thread's`, `2 threads'`.
pub(crate) fn whose(n: impl Into<u64>, one: &str, many: &str) -> String {
    match n.into() {
        1 => format!("1 {one}'s"),
        n => format!("{n} {many}'"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn counts_say_one_or_many() {
        assert_eq!(super::count(1u64, "process", "processes"), "1 process");
        assert_eq!(super::count(0u64, "process", "processes"), "0 processes");
        assert_eq!(super::count(2u32, "barrier", "barriers"), "2 barriers");
        assert_eq!(super::whose(1u64, "thread", "threads"), "1 thread's");
        assert_eq!(super::whose(3u64, "thread", "threads"), "3 threads'");
    }
}

/// What the unit tests share.
#[cfg(test)]
pub(crate) mod testing {
    /// Numbers spread over all 64 bits (xorshift from `x`, not 0), the
    /// same on every run.
    pub(crate) fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// [`xorshift`] from `x`, each number taken below the one asked.
    pub(crate) fn below(x: u64) -> impl FnMut(u64) -> u64 {
        let mut next = xorshift(x);
        move |m| next() % m
    }
}
