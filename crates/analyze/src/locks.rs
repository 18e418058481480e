//! Locks: per lock, how often it is taken, how long threads wait to take it,
//! how long it is held, and by how many threads it is contended.
//!
//! | lock | waiting to take it | holding it |
//! |---|---|---|
//! | OpenMP lock, nest lock, critical section, ordered | acquire to acquired | acquired to release |
//! | UPC lock (`upc_lock`, `upc_lock_attempt` that succeeds) | the acquiring call | its end to the start of `upc_unlock` |
//! | OpenSHMEM lock (`shmem_set_lock`) | the acquiring call | its end to the start of `shmem_clear_lock` |
//! | coarray lock (`lock`) | the acquiring call | not known (no unlock event) |
//!
//! An OpenMP lock is named by its wait id and belongs to its process; the
//! other locks are named by their address (the same on every process). A
//! thread *waited* for a lock when another thread held it while it was
//! acquiring it: that acquisition is contended and the thread counts among the
//! lock's waiters.

use std::collections::HashMap;

use gaspard_format::kinds;
use serde::Serialize;

use crate::findings::{active_span, location, thread_name, Finding, Location};
use crate::intervals::intervals;
use crate::objects::args_by_name;
use crate::trace::Trace;

/// One lock's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct LockStats {
    /// The lock: its id or address, in hex.
    pub lock: String,
    /// Where it is taken (the first acquisition's source line).
    pub location: Option<Location>,
    /// Acquisitions.
    pub acquisitions: u64,
    /// Acquisitions made while another thread held the lock.
    pub contended: u64,
    /// Time spent acquiring it, ns.
    pub wait_ns: u64,
    /// Time it was held, ns (`null` when releases are not recorded).
    pub hold_ns: Option<u64>,
    /// The threads taking it.
    pub threads: Vec<String>,
    /// How many distinct threads had to wait for another one holding it.
    pub waiters: usize,
}

/// A lock is contended when its waiting takes at least this share of the
/// working time of the threads using it.
const LOCK_SHARE: f64 = 0.05;

/// One acquisition: thread, acquiring from, acquired at.
struct Acquire {
    thread: usize,
    from: u64,
    to: u64,
}

/// One hold: thread, from, to.
struct Hold {
    thread: usize,
    from: u64,
    to: u64,
}

#[derive(Default)]
struct Lock {
    id: u64,
    site: u32,
    acquires: Vec<Acquire>,
    holds: Vec<Hold>,
    releases_known: bool,
}

fn ids(names: &[&str]) -> Vec<u16> {
    names
        .iter()
        .filter_map(|n| kinds::kind_by_name(n).map(|k| k.id))
        .collect()
}

fn lock_of(locks: &mut HashMap<(String, u64), Lock>, key: (String, u64), site: u32) -> &mut Lock {
    let id = key.1;
    locks.entry(key).or_insert_with(|| Lock {
        id,
        site,
        ..Lock::default()
    })
}

/// Every lock's acquisitions and holds.
fn collect(t: &Trace) -> Vec<Lock> {
    let acquired = kinds::kind_by_name("GASP_OMP_MUTEX_ACQUIRED").map(|k| k.id);
    let omp_mutex = ids(&[
        "GASP_OMP_LOCK",
        "GASP_OMP_NEST_LOCK",
        "GASP_OMP_CRITICAL",
        "GASP_OMP_ORDERED",
    ]);
    let acquiring = ids(&["GASP_UPC_LOCK", "GASP_SHMEM_SET_LOCK", "GASP_CAF_LOCK"]);
    let attempt = kinds::kind_by_name("GASP_UPC_LOCK_ATTEMPT").map(|k| k.id);
    let releasing = ids(&["GASP_UPC_UNLOCK", "GASP_SHMEM_CLEAR_LOCK"]);
    let mut locks: HashMap<(String, u64), Lock> = HashMap::new();
    for (si, s) in t.streams.iter().enumerate() {
        // OpenMP: acquire (START) .. acquired (ATOMIC) .. release (END), by wait id.
        let mut acquiring_omp: Vec<(u64, u64, u32)> = Vec::new(); // (wait id, acquire time, callsite)
        let mut held_omp: Vec<(u64, u64)> = Vec::new(); // (wait id, acquired time)
        for e in &s.events {
            let wait_id = || args_by_name(s, e).get("wait_id").copied().unwrap_or(0);
            if omp_mutex.contains(&e.kind) && e.phase == 0 {
                acquiring_omp.push((wait_id(), e.t_ns, e.callsite));
            } else if Some(e.kind) == acquired {
                let id = wait_id();
                if let Some(i) = acquiring_omp.iter().rposition(|p| p.0 == id) {
                    let (_, start, site) = acquiring_omp.remove(i);
                    let l = lock_of(&mut locks, (s.process.clone(), id), site);
                    l.releases_known = true;
                    l.acquires.push(Acquire {
                        thread: si,
                        from: start,
                        to: e.t_ns,
                    });
                    held_omp.push((id, e.t_ns));
                }
            } else if omp_mutex.contains(&e.kind) && e.phase == 1 {
                let id = wait_id();
                if let Some(i) = held_omp.iter().rposition(|p| p.0 == id) {
                    let (_, from) = held_omp.remove(i);
                    if let Some(l) = locks.get_mut(&(s.process.clone(), id)) {
                        l.holds.push(Hold {
                            thread: si,
                            from,
                            to: e.t_ns,
                        });
                    }
                }
            }
        }
        // Locks taken by a call (the call is the wait) and released by another.
        // Locks of other processes are the same lock when the model shares them.
        let key = |id: u64| {
            let p = if s.model == 5 {
                s.process.clone()
            } else {
                String::new()
            };
            (p, id)
        };
        let lock_arg = |ev: usize| {
            let a = args_by_name(s, &s.events[ev]);
            a.get("lock")
                .or(a.get("lck"))
                .or(a.get("coarray"))
                .copied()
                .unwrap_or(0)
        };
        let mut held: Vec<(u64, u64)> = Vec::new(); // (lock, since)
        for iv in intervals(s) {
            let id = lock_arg(iv.start_event);
            let taken = acquiring.contains(&iv.kind)
                || (Some(iv.kind) == attempt
                    && args_by_name(s, &s.events[iv.end_event]).get("result") == Some(&1));
            if taken {
                let l = lock_of(&mut locks, key(id), iv.callsite);
                l.acquires.push(Acquire {
                    thread: si,
                    from: iv.start,
                    to: iv.end,
                });
                held.push((id, iv.end));
            } else if releasing.contains(&iv.kind) {
                if let Some(i) = held.iter().rposition(|h| h.0 == id) {
                    let (_, from) = held.remove(i);
                    if let Some(l) = locks.get_mut(&key(id)) {
                        l.releases_known = true;
                        l.holds.push(Hold {
                            thread: si,
                            from,
                            to: iv.start,
                        });
                    }
                }
            }
        }
    }
    locks.into_values().collect()
}

/// Every lock's numbers, most waiting first.
pub fn locks(t: &Trace) -> Vec<LockStats> {
    let mut out: Vec<LockStats> = collect(t).into_iter().map(|l| stats(t, l)).collect();
    out.sort_by(|a, b| b.wait_ns.cmp(&a.wait_ns).then(a.lock.cmp(&b.lock)));
    out
}

fn stats(t: &Trace, mut l: Lock) -> LockStats {
    l.holds.sort_by_key(|h| h.from);
    let mut contended = 0;
    let mut waiters: Vec<usize> = Vec::new();
    for a in &l.acquires {
        // The hold just before this acquisition completed: still held by
        // another thread after this one started acquiring?
        let before = l.holds.partition_point(|h| h.from < a.to);
        let blocked = l.holds[..before]
            .iter()
            .rev()
            .take(2)
            .any(|h| h.thread != a.thread && h.to > a.from);
        if blocked {
            contended += 1;
            if !waiters.contains(&a.thread) {
                waiters.push(a.thread);
            }
        }
    }
    let mut threads: Vec<usize> = l.acquires.iter().map(|a| a.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    LockStats {
        lock: format!("{:#x}", l.id),
        location: location(t, Some(l.site)),
        acquisitions: l.acquires.len() as u64,
        contended,
        wait_ns: l.acquires.iter().map(|a| a.to.saturating_sub(a.from)).sum(),
        hold_ns: l
            .releases_known
            .then(|| l.holds.iter().map(|h| h.to.saturating_sub(h.from)).sum()),
        threads: threads
            .iter()
            .map(|&i| thread_name(&t.streams[i]))
            .collect(),
        waiters: waiters.len(),
    }
}

/// `lock_contention`: a lock whose waiting takes at least `LOCK_SHARE` (5%) of
/// the working time of the threads using it, with at least two threads
/// taking it and one of them waiting for another.
pub fn contention(t: &Trace, total_time: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    for l in locks(t) {
        let their_time: u64 = t
            .streams
            .iter()
            .filter(|s| l.threads.contains(&thread_name(s)))
            .map(active_span)
            .sum::<u64>()
            .max(1);
        let share = l.wait_ns as f64 / their_time as f64;
        if l.threads.len() < 2 || l.waiters == 0 || share < LOCK_SHARE {
            continue;
        }
        let held = match l.hold_ns {
            Some(h) => format!(
                "; it is held {:.3} ms in all ({:.3} ms per acquisition)",
                h as f64 / 1e6,
                h as f64 / 1e6 / l.acquisitions.max(1) as f64
            ),
            None => String::new(),
        };
        out.push(Finding {
            kind: "lock_contention".into(),
            severity: l.wait_ns as f64 / total_time as f64,
            threads: l.threads.clone(),
            location: l.location.clone(),
            message: format!(
                "{} threads wait {:.1}% of their time ({:.3} ms over {} acquisitions) for lock {}; {} of them \
                 waited while another held it ({} contended acquisitions){held}. Hold it for less time (move work \
                 out of the critical section), split it, or use atomics or reductions instead.",
                l.threads.len(),
                100.0 * share,
                l.wait_ns as f64 / 1e6,
                l.acquisitions,
                l.lock,
                l.waiters,
                l.contended,
            ),
        });
    }
    out
}
