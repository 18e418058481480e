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
//! other locks are shared by the processes and named the same way on every
//! process: a lock in a symmetric allocation by the allocation's source line
//! and the offset in it (`app.c:12+0x0`); a global or static variable
//! (`static long lock;` of an OpenSHMEM program), whose address differs from
//! process to process in a position-independent program, by its binary and
//! its offset in it (`app+0x4048`), for an address just above one of the
//! process's executable mappings (`<process>.maps`, within [`IMAGE_SPAN`] of
//! the start of its binary); any other by its address. A
//! thread *waited* for a lock when another thread held it while it was
//! acquiring it: that acquisition is contended and the thread counts among the
//! lock's waiters.

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds;
use serde::Serialize;

use crate::findings::{active_span, location, thread_name, Finding, Location};
use crate::intervals::intervals;
use crate::objects::arg;
use crate::trace::Trace;

/// One lock's numbers.
#[derive(Debug, Clone, Serialize)]
pub struct LockStats {
    /// The lock: its id or address in hex, or `binary+offset`.
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

/// How far past the start of a binary's first mapping its data (and so a
/// global lock) may lie.
pub const IMAGE_SPAN: u64 = 256 << 20;

/// Each process's binaries: (base address, first executable mapping's start, name).
type Images = HashMap<String, Vec<(u64, u64, String)>>;

fn images(t: &Trace) -> Images {
    let mut out: Images = HashMap::default();
    for p in &t.processes {
        let Ok(text) = std::fs::read_to_string(t.dir.join(format!("{}.maps", p.name))) else {
            continue;
        };
        let mut v: Vec<(u64, u64, String)> = Vec::new();
        for l in text.lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (Some(range), Some(offset), Some(path)) = (f.first(), f.get(2), f.get(5)) else {
                continue;
            };
            let (Some(start), Some(offset)) = (
                range
                    .split_once('-')
                    .and_then(|(a, _)| u64::from_str_radix(a, 16).ok()),
                u64::from_str_radix(offset, 16).ok(),
            ) else {
                continue;
            };
            let name = path.rsplit('/').next().unwrap_or(path).to_string();
            let base = start.saturating_sub(offset);
            match v.iter_mut().find(|i| i.2 == name) {
                Some(i) => {
                    i.0 = i.0.min(base);
                    i.1 = i.1.min(start);
                }
                None => v.push((base, start, name)),
            }
        }
        out.insert(p.name.clone(), v);
    }
    out
}

/// A shared lock's key: (object, offset) for an address in a symmetric
/// allocation, (binary, offset) for an address in a binary's image, else
/// ("", address).
fn shared_lock(t: &Trace, images: &Images, process: &str, addr: u64, time: u64) -> (String, u64) {
    if let Some((object, offset)) = t.objects.find(process, addr, time) {
        return (object.to_string(), offset);
    }
    let image = images.get(process).and_then(|v| {
        v.iter()
            .filter(|i| i.1 <= addr && addr - i.0 < IMAGE_SPAN)
            .max_by_key(|i| i.1)
    });
    match image {
        Some((base, _, name)) => (name.clone(), addr - base),
        None => (String::new(), addr),
    }
}

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
    name: String,
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

/// The lock of `key`, named `name` when first met.
fn lock_of(
    locks: &mut HashMap<(String, u64), Lock>,
    key: (String, u64),
    name: String,
    site: u32,
) -> &mut Lock {
    locks.entry(key).or_insert_with(|| Lock {
        name,
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
    // Whether a kind takes part, by number: most events do not.
    let mut involved = vec![false; 1 << 16];
    for &k in omp_mutex
        .iter()
        .chain(&acquiring)
        .chain(&releasing)
        .chain(&acquired)
        .chain(&attempt)
    {
        involved[k as usize] = true;
    }
    let mut locks: HashMap<(String, u64), Lock> = HashMap::default();
    let images = images(t);
    let lock_kinds: Vec<u16> = (0..=u16::MAX).filter(|&k| involved[k as usize]).collect();
    for (si, s) in t.streams.iter().enumerate() {
        if !lock_kinds.iter().any(|&k| crate::intervals::has_kind(s, k)) {
            continue;
        }
        // OpenMP: acquire (START) .. acquired (ATOMIC) .. release (END), by wait id.
        let mut acquiring_omp: Vec<(u64, u64, u32)> = Vec::new(); // (wait id, acquire time, callsite)
        let mut held_omp: Vec<(u64, u64)> = Vec::new(); // (wait id, acquired time)
        for e in s.events.iter().filter(|e| involved[e.kind as usize]) {
            let wait_id = || arg(s, e, "wait_id").unwrap_or(0);
            if omp_mutex.contains(&e.kind) && e.phase == 0 {
                acquiring_omp.push((wait_id(), e.t_ns, e.callsite));
            } else if Some(e.kind) == acquired {
                let id = wait_id();
                if let Some(i) = acquiring_omp.iter().rposition(|p| p.0 == id) {
                    let (_, start, site) = acquiring_omp.remove(i);
                    let key = (s.process.clone(), id);
                    let l = lock_of(&mut locks, key, format!("{id:#x}"), site);
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
        let key = |id: u64, time: u64| {
            if s.model == 5 {
                (s.process.clone(), id)
            } else {
                shared_lock(t, &images, &s.process, id, time)
            }
        };
        let lock_arg = |ev: usize| {
            let e = &s.events[ev];
            arg(s, e, "lock")
                .or_else(|| arg(s, e, "lck"))
                .or_else(|| arg(s, e, "coarray"))
                .unwrap_or(0)
        };
        let mut held: Vec<(u64, u64)> = Vec::new(); // (lock, since)
        for iv in intervals(s).iter().filter(|iv| involved[iv.kind as usize]) {
            if !acquiring.contains(&iv.kind)
                && Some(iv.kind) != attempt
                && !releasing.contains(&iv.kind)
            {
                continue;
            }
            let id = lock_arg(iv.start_event as usize);
            let taken = acquiring.contains(&iv.kind)
                || (Some(iv.kind) == attempt
                    && arg(s, &s.events[iv.end_event as usize], "result") == Some(1));
            if taken {
                let (object, off) = key(id, iv.start);
                let name = if object.is_empty() || s.model == 5 {
                    format!("{id:#x}")
                } else {
                    format!("{object}+{off:#x}")
                };
                let l = lock_of(&mut locks, (object, off), name, iv.callsite);
                l.acquires.push(Acquire {
                    thread: si,
                    from: iv.start,
                    to: iv.end,
                });
                held.push((id, iv.end));
            } else if releasing.contains(&iv.kind) {
                if let Some(i) = held.iter().rposition(|h| h.0 == id) {
                    let (_, from) = held.remove(i);
                    if let Some(l) = locks.get_mut(&key(id, iv.start)) {
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
        lock: l.name,
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
    contention_of(t, &locks(t), total_time)
}

/// [`contention`], from the trace's [`locks`].
pub(crate) fn contention_of(t: &Trace, locks: &[LockStats], total_time: u64) -> Vec<Finding> {
    let mut out = Vec::new();
    for l in locks {
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
