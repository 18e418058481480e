//! A thread's barriers and its work between them, as its summary keeps them
//! until every process is read: packed, 6 to 8 bytes a barrier rather than
//! 32 (its arrival, departure, callsite and the work before it).
//!
//! A trace of 200 M events with a barrier every 14 events has 14 M barriers
//! across its threads: kept as plain numbers they were 457 MB, allocated
//! among each process's passing data, and the kernel zeroing the fresh pages
//! that held them and those around them was 1.2 to 2.8 s of system time in a
//! report of 7.5 to 10 s of CPU time. Packed, they are 86 MB.
//!
//! Each barrier is written as four values: its arrival less the previous
//! departure (zigzag; the first's from the base), its departure less its
//! arrival, its callsite (0: the previous barrier's, else its place in the
//! list of callsites plus one) and the time the thread spent in
//! synchronization and communication since the previous departure (the
//! first's: 0). A byte gives their sizes, two bits each (1, 2, 4 or 8
//! bytes), then come their bytes, little-endian: 6 to 8 bytes a barrier
//! mostly, read without a loop (the merges read every thread's barriers,
//! and some threads' twice). The differences wrap: any times come back as
//! they were. A shift of every time (the summary made the trace's) changes
//! the base, and a renumbering of callsites the short list, not the bytes.

use gaspard_format::varint::{unzigzag, zigzag};
use serde::{Deserialize, Serialize};

use crate::findings::BarrierSpan;

/// A thread's barriers in order, with its work between consecutive ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Packed")]
pub struct Epochs {
    /// How many barriers.
    len: usize,
    /// What the times written are relative to.
    base: u64,
    /// The latest time (arrival or departure) of a barrier.
    latest: u64,
    /// The callsites, each once, in the order met.
    sites: Vec<u32>,
    /// The barriers, packed as the module says.
    bytes: Vec<u8>,
}

/// [`Epochs`] as a rank of `gaspard report --mpi` sends it, checked before
/// it is taken: a barrier takes 5 bytes at least, so that a count of
/// barriers its bytes cannot hold (a damaged message) is refused rather
/// than sizing the merges' tables.
#[derive(Deserialize)]
struct Packed {
    len: usize,
    base: u64,
    latest: u64,
    sites: Vec<u32>,
    bytes: Vec<u8>,
}

impl TryFrom<Packed> for Epochs {
    type Error = String;

    fn try_from(p: Packed) -> Result<Epochs, String> {
        if p.len > p.bytes.len() / 5 {
            return Err(format!(
                "{} barriers in {} bytes: a barrier takes 5 bytes at least",
                p.len,
                p.bytes.len()
            ));
        }
        Ok(Epochs {
            len: p.len,
            base: p.base,
            latest: p.latest,
            sites: p.sites,
            bytes: p.bytes,
        })
    }
}

/// [`Epochs`] made barrier by barrier, in order ([`Epochs::new`]): a
/// stream read in windows packs each barrier once it is known, rather than
/// keeping them all until its end.
#[derive(Debug, Clone, Default)]
pub(crate) struct Packer {
    len: usize,
    bytes: Vec<u8>,
    /// The callsites, each once, in the order met.
    sites: Vec<u32>,
    /// The last barrier's departure and callsite.
    end: u64,
    site: Option<u32>,
    latest: u64,
}

impl Packer {
    /// Adds the next barrier, with the time the thread spent in
    /// synchronization and communication since leaving the one before
    /// (not used for the first).
    pub(crate) fn push(&mut self, b: BarrierSpan, busy: u64) {
        let gap = zigzag(b.start.wrapping_sub(self.end) as i64);
        let code = if self.site == Some(b.callsite) {
            0
        } else {
            // A thread's barriers are at a few callsites.
            let at = match self.sites.iter().position(|&s| s == b.callsite) {
                Some(at) => at,
                None => {
                    self.sites.push(b.callsite);
                    self.sites.len() - 1
                }
            };
            at as u64 + 1
        };
        let busy = if self.len > 0 { busy } else { 0 };
        put(
            &mut self.bytes,
            [gap, b.end.wrapping_sub(b.start), code, busy],
        );
        (self.end, self.site) = (b.end, Some(b.callsite));
        self.latest = self.latest.max(b.start).max(b.end);
        self.len += 1;
    }

    /// The barriers added.
    pub(crate) fn finish(mut self) -> Epochs {
        self.bytes.shrink_to_fit();
        Epochs {
            len: self.len,
            base: 0,
            latest: self.latest,
            sites: self.sites,
            bytes: self.bytes,
        }
    }
}

/// One barrier as [`Epochs::iter_with_work`] gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Barrier {
    /// The barrier.
    pub span: BarrierSpan,
    /// The previous barrier's departure (the first's: 0).
    pub after: u64,
    /// The work since the previous barrier: from leaving it to arriving at
    /// this one, less the time in synchronization and communication (the
    /// first's: 0).
    pub work: f64,
}

impl Epochs {
    /// Of `barriers` in order, each with the time the thread spent in
    /// synchronization and communication between leaving the previous one
    /// and arriving at it (the first's is not used).
    pub(crate) fn new(barriers: impl ExactSizeIterator<Item = (BarrierSpan, u64)>) -> Epochs {
        // Mostly 6 to 8 bytes a barrier: reserved so, then made to size.
        let mut p = Packer {
            bytes: Vec::with_capacity(barriers.len() * 8),
            ..Default::default()
        };
        for (b, busy) in barriers {
            p.push(b, busy);
        }
        p.finish()
    }

    /// How many barriers.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The barriers in order (without working out the work before each).
    pub fn iter(&self) -> impl Iterator<Item = BarrierSpan> + '_ {
        let mut it = self.iter_with_work();
        std::iter::from_fn(move || it.next_raw().map(|(span, _)| span))
    }

    /// The barriers in order, each with the work before it.
    pub fn iter_with_work(&self) -> Iter<'_> {
        Iter {
            bytes: &self.bytes,
            sites: &self.sites,
            pos: 0,
            left: self.len,
            first: true,
            end: self.base,
            site: 0,
        }
    }

    /// The same barriers, each time `t` made `t.saturating_add(after)` and
    /// each callsite `c` made `site(c)` (their work is unchanged: a time
    /// between barriers, less the time the thread was busy in it).
    pub(crate) fn rebase(&mut self, after: u64, site: impl Fn(u32) -> u32) {
        for s in &mut self.sites {
            *s = site(*s);
        }
        match self.latest.checked_add(after) {
            // No time saturates: each is shifted by as much.
            Some(latest) => {
                self.base = self.base.wrapping_add(after);
                self.latest = latest;
            }
            None => {
                let mut it = self.iter_with_work();
                let shifted: Vec<(BarrierSpan, u64)> = std::iter::from_fn(|| it.next_raw())
                    .map(|(b, busy)| {
                        let span = BarrierSpan {
                            start: b.start.saturating_add(after),
                            end: b.end.saturating_add(after),
                            callsite: b.callsite,
                        };
                        (span, busy)
                    })
                    .collect();
                *self = Epochs::new(shifted.into_iter());
            }
        }
    }
}

#[cfg(test)]
impl Epochs {
    /// The same barriers with only the first `n` of their bytes, as a
    /// damaged summary may give them (the same count of barriers said).
    pub(crate) fn cut(&self, n: usize) -> Epochs {
        Epochs {
            bytes: self.bytes[..n.min(self.bytes.len())].to_vec(),
            ..self.clone()
        }
    }

    /// How many bytes the barriers take.
    pub(crate) fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// The same barriers packed from a base of 0: summaries shifted by
    /// different amounts ([`Epochs::rebase`]) compare as written.
    pub(crate) fn repacked(&self) -> Epochs {
        let mut it = self.iter_with_work();
        let all: Vec<(BarrierSpan, u64)> = std::iter::from_fn(|| it.next_raw()).collect();
        Epochs::new(all.into_iter())
    }
}

/// The barriers of an [`Epochs`], in order ([`Epochs::iter_with_work`]).
#[derive(Debug)]
pub struct Iter<'a> {
    bytes: &'a [u8],
    sites: &'a [u32],
    pos: usize,
    left: usize,
    first: bool,
    end: u64,
    site: u32,
}

impl Iter<'_> {
    /// The next barrier and the busy time written with it. Bytes the
    /// summary did not write (a rank's message cut short) end the barriers.
    #[inline]
    fn next_raw(&mut self) -> Option<(BarrierSpan, u64)> {
        if self.left == 0 {
            return None;
        }
        let read = get(self.bytes, &mut self.pos).and_then(|[gap, len, code, busy]| {
            let site = match code {
                0 => self.site,
                c => *self.sites.get(usize::try_from(c - 1).ok()?)?,
            };
            Some((gap, len, site, busy))
        });
        let Some((gap, len, site, busy)) = read else {
            self.left = 0;
            return None;
        };
        let start = self.end.wrapping_add(unzigzag(gap) as u64);
        let span = BarrierSpan {
            start,
            end: start.wrapping_add(len),
            callsite: site,
        };
        self.left -= 1;
        self.first = false;
        (self.end, self.site) = (span.end, site);
        Some((span, busy))
    }
}

/// The size code of `v`: 0 to 3 for 1, 2, 4 or 8 bytes.
#[inline]
fn size_code(v: u64) -> u8 {
    match v {
        0..=0xff => 0,
        0x100..=0xffff => 1,
        0x1_0000..=0xffff_ffff => 2,
        _ => 3,
    }
}

/// Appends the four values of a barrier: their sizes, then their bytes.
#[inline]
fn put(bytes: &mut Vec<u8>, values: [u64; 4]) {
    // Each value's eight bytes written in a buffer, the next on its first
    // unused byte; the bytes used appended at once.
    let mut buf = [0u8; WIDEST];
    let mut at = 1;
    for (i, v) in values.into_iter().enumerate() {
        let code = size_code(v);
        buf[0] |= code << (2 * i);
        buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
        at += 1 << code;
    }
    bytes.extend_from_slice(&buf[..at]);
}

/// The widest a barrier's bytes can be: its sizes, and four values of 8.
const WIDEST: usize = 1 + 4 * 8;

/// Per sizes byte, where its values' bytes start from it, and where the
/// next barrier's sizes byte is.
const OFFSETS: [[u8; 5]; 256] = {
    let mut t = [[0u8; 5]; 256];
    let mut tag = 0;
    while tag < 256 {
        let mut at = 1u8;
        let mut i = 0;
        while i < 4 {
            t[tag][i] = at;
            at += 1 << (tag >> (2 * i) & 3);
            i += 1;
        }
        t[tag][4] = at;
        tag += 1;
    }
    t
};

/// The four values of a barrier at `*pos` in `bytes` (moved past them), if
/// whole.
#[inline(always)]
fn get(bytes: &[u8], pos: &mut usize) -> Option<[u64; 4]> {
    const MASK: [u64; 4] = [0xff, 0xffff, 0xffff_ffff, u64::MAX];
    // Eight bytes at once for each value, masked to its size, where the
    // widest barrier would fit.
    let Some(w) = bytes.get(*pos..*pos + WIDEST) else {
        return get_near_end(bytes, pos);
    };
    let tag = usize::from(w[0]);
    let at = &OFFSETS[tag];
    let value = |i: usize| {
        let o = usize::from(at[i]);
        let mut b = [0u8; 8];
        b.copy_from_slice(&w[o..o + 8]);
        u64::from_le_bytes(b) & MASK[tag >> (2 * i) & 3]
    };
    let values = [value(0), value(1), value(2), value(3)];
    *pos += usize::from(at[4]);
    Some(values)
}

/// [`get`] for a barrier whose widest would pass the end of `bytes`.
#[inline(never)]
fn get_near_end(bytes: &[u8], pos: &mut usize) -> Option<[u64; 4]> {
    let tag = *bytes.get(*pos)?;
    let mut at = *pos + 1;
    let mut values = [0u64; 4];
    for (i, v) in values.iter_mut().enumerate() {
        let n = 1 << (tag >> (2 * i) & 3);
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(bytes.get(at..at + n)?);
        *v = u64::from_le_bytes(b);
        at += n;
    }
    *pos = at;
    Some(values)
}

impl Iterator for Iter<'_> {
    type Item = Barrier;

    #[inline]
    fn next(&mut self) -> Option<Barrier> {
        let (after, first) = (self.end, self.first);
        let (span, busy) = self.next_raw()?;
        let (after, work) = if first {
            (0, 0.0)
        } else {
            (
                after,
                span.start.saturating_sub(after).saturating_sub(busy) as f64,
            )
        };
        Some(Barrier { span, after, work })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: u64, end: u64, callsite: u32) -> BarrierSpan {
        BarrierSpan {
            start,
            end,
            callsite,
        }
    }

    /// `v` with, before each barrier but the first, `busy(from, to)`: the
    /// previous departure and its arrival.
    fn with_busy(
        v: &[BarrierSpan],
        busy: impl Fn(u64, u64) -> u64,
    ) -> impl ExactSizeIterator<Item = (BarrierSpan, u64)> + '_ {
        let busy: Vec<u64> = (0..v.len())
            .map(|k| match k {
                0 => 0,
                k => busy(v[k - 1].end, v[k].start),
            })
            .collect();
        v.iter().copied().zip(busy)
    }

    #[test]
    fn barriers_come_back_as_they_were() {
        // Times far apart, out of order, overlapping, at the ends of u64,
        // and callsites changing, repeating, and the largest.
        let v = vec![
            span(0, 0, 0),
            span(5, 1_000_000, 7),
            span(900_000, 900_001, 7),
            span(u64::MAX - 3, u64::MAX, u32::MAX),
            span(1, 2, 0),
            span(u64::MAX, 3, 3),
            span(40, 40, 3),
        ];
        let busy = |from: u64, to: u64| from ^ to.rotate_left(7);
        let e = Epochs::new(with_busy(&v, busy));
        assert_eq!(e.len(), v.len());
        assert_eq!(e.iter().collect::<Vec<_>>(), v);
        let got: Vec<Barrier> = e.iter_with_work().collect();
        for (k, b) in got.iter().enumerate() {
            let (after, work) = if k == 0 {
                (0, 0.0)
            } else {
                let (from, to) = (v[k - 1].end, v[k].start);
                (
                    from,
                    to.saturating_sub(from).saturating_sub(busy(from, to)) as f64,
                )
            };
            assert_eq!((b.after, b.work), (after, work), "barrier {k}");
        }
        // Made the trace's: shifted, with callsites renumbered, the same
        // work; times that would pass u64::MAX saturate.
        let site = |c: u32| c / 2;
        for after in [0, 10, u64::MAX - 5, u64::MAX] {
            let mut m = e.clone();
            m.rebase(after, site);
            let want: Vec<BarrierSpan> = v
                .iter()
                .map(|b| {
                    span(
                        b.start.saturating_add(after),
                        b.end.saturating_add(after),
                        site(b.callsite),
                    )
                })
                .collect();
            assert_eq!(m.iter().collect::<Vec<_>>(), want, "shifted by {after}");
            // The work as it is of the new times, with the same busy times.
            for (k, b) in m.iter_with_work().enumerate().skip(1) {
                let busy = busy(v[k - 1].end, v[k].start);
                let (from, to) = (want[k - 1].end, want[k].start);
                assert_eq!(b.work, to.saturating_sub(from).saturating_sub(busy) as f64);
            }
        }
        // Shifted twice, within u64: as once by the sum.
        let small: Vec<BarrierSpan> = v
            .iter()
            .filter(|b| b.start.max(b.end) < 1 << 40)
            .copied()
            .collect();
        let mut twice = Epochs::new(with_busy(&small, |_, _| 3));
        twice.rebase(7, |c| c);
        twice.rebase(5, |c| c + 1);
        let want: Vec<BarrierSpan> = small
            .iter()
            .map(|b| span(b.start + 12, b.end + 12, b.callsite + 1))
            .collect();
        assert_eq!(twice.iter().collect::<Vec<_>>(), want);
    }

    #[test]
    fn each_value_takes_the_bytes_it_needs() {
        for (v, code) in [
            (0, 0),
            (1, 0),
            (0xff, 0),
            (0x100, 1),
            (0xffff, 1),
            (0x1_0000, 2),
            (0xff_ffff, 2),
            (0xffff_ffff, 2),
            (0x1_0000_0000, 3),
            (u64::MAX, 3),
        ] {
            assert_eq!(size_code(v), code, "{v:#x}");
        }
    }

    #[test]
    fn a_few_bytes_a_barrier() {
        // Barriers a few microseconds apart at one callsite.
        let v: Vec<BarrierSpan> = (0..1000u64)
            .map(|k| span(5_000_000 + k * 7_000, 5_000_000 + k * 7_000 + 900, 12))
            .collect();
        let e = Epochs::new(with_busy(&v, |_, _| 300));
        assert_eq!(e.iter().collect::<Vec<_>>(), v);
        // Each: its sizes, 2 bytes of arrival (from the previous departure,
        // zigzag), 2 of departure, 1 of callsite (the same), 2 of busy time;
        // the first's arrival (from 0) 4 bytes, and 1 of busy time (none).
        assert_eq!(e.bytes.len(), 9 + 8 * (v.len() - 1));
        assert!(e.iter_with_work().skip(1).all(|b| b.work == 5_800.0));
    }

    #[test]
    fn sent_and_received_as_they_were_or_refused() {
        let v: Vec<BarrierSpan> = (0..50u64).map(|k| span(k * 100, k * 100 + 50, 1)).collect();
        let mut e = Epochs::new(with_busy(&v, |_, _| 1));
        e.rebase(1 << 40, |c| c + 3);
        let sent = postcard::to_stdvec(&e).unwrap();
        let got: Epochs = postcard::from_bytes(&sent).unwrap();
        assert_eq!(got, e);
        // The least bytes for their count: taken.
        let least = Epochs {
            len: 3,
            bytes: vec![0; 15],
            ..Epochs::default()
        };
        let got: Epochs = postcard::from_bytes(&postcard::to_stdvec(&least).unwrap()).unwrap();
        assert_eq!(got, least);
        // More barriers than their bytes can hold: refused.
        for len in [4, 1 << 40, usize::MAX] {
            let bad = Epochs {
                len,
                ..least.clone()
            };
            let r = postcard::from_bytes::<Epochs>(&postcard::to_stdvec(&bad).unwrap());
            assert!(r.is_err(), "{len} barriers taken");
        }
    }

    #[test]
    fn bytes_cut_short_end_the_barriers() {
        let v: Vec<BarrierSpan> = (0..50u64).map(|k| span(k * 100, k * 100 + 50, 1)).collect();
        let e = Epochs::new(with_busy(&v, |_, _| 1));
        for cut in 0..e.bytes.len() {
            let short = Epochs {
                bytes: e.bytes[..cut].to_vec(),
                ..e.clone()
            };
            let got: Vec<BarrierSpan> = short.iter().collect();
            assert!(got.len() < v.len());
            assert_eq!(got, v[..got.len()]);
        }
        // And more barriers said than written: those written.
        let long = Epochs {
            len: e.len + 5,
            ..e.clone()
        };
        assert_eq!(long.iter().collect::<Vec<_>>(), v);
    }
}
