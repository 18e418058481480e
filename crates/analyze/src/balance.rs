//! Load balance, as numbers: per group of threads that meet at barriers, the
//! spread of arrival times at each barrier and who arrives last from where;
//! per work-sharing construct or user region, how unevenly the threads'
//! time in it is spread.

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::kinds::{self, Class};
use serde::{Deserialize, Serialize};

use crate::dump::event_name;
use crate::findings::{location_in, Location, Part};
use crate::intervals::Interval;
use crate::summary::Identity;
use crate::trace::{Callsite, Event, Stream, Trace};

/// One barrier epoch: the barrier that ends it.
#[derive(Debug, Clone, Serialize)]
pub struct Epoch {
    /// Barrier number in the group (from 0).
    pub epoch: usize,
    /// Last arrival less first arrival, ns.
    pub spread_ns: u64,
    /// The thread that arrived last.
    pub last: String,
    /// The thread that arrived first (and waited longest).
    pub first: String,
    /// Where the last thread's barrier is.
    pub location: Option<Location>,
}

/// The barriers of one group of threads.
#[derive(Debug, Clone, Serialize)]
pub struct BarrierGroup {
    /// The threads.
    pub threads: Vec<String>,
    /// Barriers every thread passed.
    pub epochs: usize,
    /// Mean spread of arrivals, ns.
    pub mean_spread_ns: f64,
    /// Largest spread, ns.
    pub max_spread_ns: u64,
    /// Per thread, the number of barriers it arrived at last.
    pub last_arrivals: Vec<u64>,
    /// Per thread, time waiting in barriers, ns.
    pub wait_ns: Vec<u64>,
    /// The epochs with the widest spread (up to [`WIDEST`]), widest first.
    pub widest: Vec<Epoch>,
}

/// How one construct or region is shared among threads.
#[derive(Debug, Clone, Serialize)]
pub struct Region {
    /// Event name (`GASP_OMP_LOOP`, a user event, ...).
    pub name: String,
    /// Where it starts.
    pub location: Option<Location>,
    /// Threads that ran it.
    pub threads: usize,
    /// Mean per-thread time in it, ns.
    pub mean_ns: f64,
    /// Largest per-thread time, ns.
    pub max_ns: u64,
    /// The thread with the largest time.
    pub slowest: String,
    /// (max - mean) / max: 0 when balanced, towards 1 when one thread does it all.
    pub imbalance: f64,
}

/// The load balance of a trace.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Balance {
    /// Per group of threads meeting at barriers.
    pub barriers: Vec<BarrierGroup>,
    /// Work-sharing constructs and user regions run by two or more threads,
    /// most imbalanced time first.
    pub regions: Vec<Region>,
}

/// How many epochs [`BarrierGroup::widest`] lists.
pub const WIDEST: usize = 20;

/// Computes the load balance of `t`.
pub fn balance(t: &Trace) -> Balance {
    let ids: Vec<Identity> = t.streams.iter().map(Identity::of).collect();
    let parts: Vec<Part> = t.streams.iter().map(|s| Part::of(t, s)).collect();
    merge(&ids, &t.callsites, &parts.iter().collect::<Vec<_>>())
}

/// The load balance from every stream's part (`parts[i]`: stream `i`'s).
pub fn merge(ids: &[Identity], sites: &[Callsite], parts: &[&Part]) -> Balance {
    let passes = crate::findings::group_passes(ids, parts);
    merge_passed(ids, sites, parts, &passes)
}

/// [`merge`], with the pass over each group's barriers made
/// ([`crate::findings::group_passes`]).
pub(crate) fn merge_passed(
    ids: &[Identity],
    sites: &[Callsite],
    parts: &[&Part],
    passes: &[crate::findings::GroupPass],
) -> Balance {
    let mut groups = Vec::new();
    for g in passes {
        let members = &g.members;
        let name = |m: usize| ids[members[m]].name.clone();
        groups.push(BarrierGroup {
            threads: (0..members.len()).map(name).collect(),
            epochs: g.epochs,
            mean_spread_ns: g.spread_sum as f64 / g.epochs as f64,
            max_spread_ns: g.spread_max,
            last_arrivals: g.last_arrivals.clone(),
            wait_ns: g.wait.clone(),
            widest: g
                .widest
                .iter()
                .map(|w| Epoch {
                    epoch: w.epoch,
                    spread_ns: w.spread,
                    last: name(w.last),
                    first: name(w.first),
                    location: location_in(sites, Some(w.site)),
                })
                .collect(),
        });
    }
    Balance {
        barriers: groups,
        regions: regions(ids, sites, parts),
    }
}

/// What names a construct or region and where it starts: (kind, user
/// event, function, callsite).
type RegionKey = (u16, Option<u32>, u32, u32);

/// One thread's time in one construct or region.
#[derive(Debug, Clone)]
pub(crate) struct RegionTime {
    key: RegionKey,
    /// The first of its STARTs.
    pub(crate) start_event: u32,
    total: u64,
}

impl RegionTime {
    /// Named `name`.
    pub(crate) fn named(&self, name: String) -> NamedRegion {
        NamedRegion {
            key: self.key,
            name,
            total: self.total,
        }
    }
}

/// A thread's time in work-sharing constructs (OpenMP loops, sections, ...,
/// UPC forall) and user regions, per name and callsite in the order first
/// met; no name is made per interval. Computed once per stream, in the walk
/// over its intervals of [`crate::findings::walked`].
pub(crate) fn regions_of(s: &Stream) -> &[RegionTime] {
    &crate::findings::walked(s).regions
}

/// The kinds of [`regions_of`], by number (user events are of kind
/// `GASPARD_USER`): the other intervals are passed over without reading
/// their events.
pub(crate) fn region_kinds() -> &'static [bool] {
    static CANDIDATE: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    CANDIDATE.get_or_init(|| {
        let skip = [
            "GASP_OMP_PARALLEL",
            "GASP_OMP_IMPLICIT_TASK",
            "GASP_OMP_TASK_SCHEDULE",
        ];
        let mut v = vec![false; 1 << 16];
        v[kinds::GASPARD_USER as usize] = true;
        for k in kinds::all_kinds() {
            if k.class == Class::Work && !skip.contains(&k.name) {
                v[k.id as usize] = true;
            }
        }
        v
    })
}

/// [`regions_of`], made as a stream's intervals come in order.
pub(crate) struct Regions {
    /// Where each key is in `v`.
    at: HashMap<RegionKey, usize>,
    v: Vec<RegionTime>,
    /// Per shape of START, its entry of `v` ([`Regions::LEFT_OUT`] for a
    /// region left out).
    shapes: crate::shape::Table<u32>,
}

impl Regions {
    /// A stream has a few regions, mostly: looked for among the first ones,
    /// then in the map (which has every key).
    const NEAR: usize = 8;
    /// The entry of a shape whose intervals are left out.
    const LEFT_OUT: u32 = u32::MAX;

    /// None yet.
    pub(crate) fn new() -> Regions {
        Regions {
            at: HashMap::default(),
            v: Vec::new(),
            shapes: crate::shape::Table::new(),
        }
    }

    /// Adds `iv`, an interval of one of the [`region_kinds`] whose START is
    /// `e`.
    #[inline(always)]
    pub(crate) fn add(&mut self, iv: &Interval, e: &Event) -> Option<u32> {
        // An interval's callsite is its START's.
        let shape = crate::shape::of(e);
        let i = match self.shapes.get(shape) {
            Some(i) => i,
            None => {
                let i = self.entry(iv, e);
                self.shapes.set(shape, i);
                i
            }
        };
        if i == Self::LEFT_OUT {
            return None;
        }
        let r = &mut self.v[i as usize];
        r.total = r.total.saturating_add(iv.end.saturating_sub(iv.start));
        Some(i)
    }

    /// The regions so far, in the order first met.
    pub(crate) fn made(&self) -> &[RegionTime] {
        &self.v
    }

    /// The entry of `v` of `iv`, whose START is `e`, made when first met.
    fn entry(&mut self, iv: &Interval, e: &Event) -> u32 {
        // A user event's interval without the user event's number
        // (damaged) is left out.
        if iv.kind == kinds::GASPARD_USER && e.user().is_none() {
            return Self::LEFT_OUT;
        }
        let key = (e.kind, e.user(), e.text, iv.callsite);
        let v = &mut self.v;
        let near = v[..v.len().min(Self::NEAR)]
            .iter()
            .position(|r| r.key == key);
        let i = near.unwrap_or_else(|| {
            *self.at.entry(key).or_insert_with(|| {
                v.push(RegionTime {
                    key,
                    start_event: iv.start_event,
                    total: 0,
                });
                v.len() - 1
            })
        });
        i as u32
    }

    /// The regions, in the order first met.
    pub(crate) fn done(self) -> Vec<RegionTime> {
        self.v
    }
}

/// A thread's time in one construct or region, named.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NamedRegion {
    /// (kind, user event, function, callsite).
    key: RegionKey,
    /// Its name ([`crate::dump::event_name`] of its first START).
    name: String,
    /// The thread's time in it, ns.
    total: u64,
}

impl NamedRegion {
    /// Its key in the trace's numbers ([`crate::summary::Rebase`]).
    pub(crate) fn rebase(&mut self, r: &crate::summary::Rebase) {
        let (kind, user, text, site) = self.key;
        self.key = (kind, user.map(|u| r.user(u)), r.text(text), r.site(site));
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }
    /// Where it starts (a callsite of the trace).
    pub(crate) fn site(&self) -> u32 {
        self.key.3
    }
    /// The thread's time in it, ns.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }
}

/// [`regions_of`] of `s` (one of the streams of `t`), named.
pub(crate) fn named_regions(t: &Trace, s: &Stream) -> Vec<NamedRegion> {
    regions_of(s)
        .iter()
        .map(|r| NamedRegion {
            key: r.key,
            name: event_name(t, &s.events[r.start_event as usize]),
            total: r.total,
        })
        .collect()
}

/// Work-sharing constructs and user regions, per name and callsite: each
/// thread's total time in them.
fn regions(ids: &[Identity], sites: &[Callsite], parts: &[&Part]) -> Vec<Region> {
    // (kind, user event, function, callsite) -> its name and the per stream
    // totals (streams in order, each once), in the order first met.
    type Group<'a> = (&'a str, u32, Vec<(usize, u64)>);
    let mut group_of: HashMap<RegionKey, usize> = HashMap::default();
    let mut groups: Vec<Group> = Vec::new();
    for (si, part) in parts.iter().enumerate() {
        for r in &part.regions {
            let g = *group_of.entry(r.key).or_insert_with(|| {
                groups.push((&r.name, r.key.3, Vec::new()));
                groups.len() - 1
            });
            groups[g].2.push((si, r.total));
        }
    }
    // (name, callsite) -> per stream total
    let mut per: HashMap<(String, u32), HashMap<usize, u64>> = HashMap::default();
    for (name, site, totals) in groups {
        let m = per.entry((name.to_string(), site)).or_default();
        for (s, d) in totals {
            *m.entry(s).or_default() += d;
        }
    }
    let mut out: Vec<Region> = per
        .into_iter()
        .filter(|(_, m)| m.len() >= 2)
        .map(|((name, site), m)| {
            let (&slow, &max) = m
                .iter()
                .max_by_key(|(s, d)| (**d, std::cmp::Reverse(**s)))
                .unwrap();
            let mean = m.values().sum::<u64>() as f64 / m.len() as f64;
            Region {
                name,
                location: location_in(sites, Some(site)),
                threads: m.len(),
                mean_ns: mean,
                max_ns: max,
                slowest: ids[slow].name.clone(),
                imbalance: if max == 0 {
                    0.0
                } else {
                    (max as f64 - mean) / max as f64
                },
            }
        })
        .collect();
    out.sort_by(|a, b| {
        let ka = a.max_ns as f64 - a.mean_ns;
        let kb = b.max_ns as f64 - b.mean_ns;
        kb.total_cmp(&ka).then(a.name.cmp(&b.name))
    });
    out
}

fn ms(ns: f64) -> String {
    format!("{:.3} ms", ns / 1e6)
}

/// The load balance section of the text report.
pub fn to_text(b: &Balance, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    if b.barriers.is_empty() && b.regions.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nLoad balance")?;
    for g in &b.barriers {
        writeln!(
            out,
            "  {}, {}: arrivals spread {} on average, {} at most",
            crate::count(g.threads.len() as u64, "thread", "threads"),
            crate::count(g.epochs as u64, "barrier", "barriers"),
            ms(g.mean_spread_ns),
            ms(g.max_spread_ns as f64)
        )?;
        if g.threads.len() <= 16 {
            for (i, th) in g.threads.iter().enumerate() {
                writeln!(
                    out,
                    "    {th}: last at {}, waits {}",
                    crate::count(g.last_arrivals[i], "barrier", "barriers"),
                    ms(g.wait_ns[i] as f64)
                )?;
            }
        }
        for e in g.widest.iter().take(3) {
            let at = e
                .location
                .as_ref()
                .map(|l| format!(" at {}:{}", l.file, l.line))
                .unwrap_or_default();
            writeln!(
                out,
                "    barrier {}: spread {}, {} last{at}, {} first",
                e.epoch,
                ms(e.spread_ns as f64),
                e.last,
                e.first
            )?;
        }
    }
    let uneven: Vec<&Region> = b
        .regions
        .iter()
        .filter(|r| r.imbalance >= 0.1)
        .take(10)
        .collect();
    if !uneven.is_empty() {
        writeln!(out, "  Uneven constructs and regions ((max - mean) / max):")?;
        for r in uneven {
            let at = r
                .location
                .as_ref()
                .map(|l| format!(" at {}:{}", l.file, l.line))
                .unwrap_or_default();
            writeln!(
                out,
                "    {}{at}: {:.0}% over {}, mean {}, max {} ({})",
                r.name,
                100.0 * r.imbalance,
                crate::count(r.threads as u64, "thread", "threads"),
                ms(r.mean_ns),
                ms(r.max_ns as f64),
                r.slowest
            )?;
        }
    }
    Ok(())
}
