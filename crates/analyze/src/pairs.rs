//! A stream's lock acquisitions or holds, as its summary keeps them until
//! every process is read: pairs of times (from, to), packed. A program
//! taking a lock a million times makes a million of each per thread; kept as
//! plain numbers they were 16 bytes a pair, 32 with the room a growing list
//! leaves, and they were most of the memory of a report of such a program.
//!
//! Each pair is written as two LEB128 values: its `from` less the previous
//! pair's `from` (zigzag; the first's from the base), then its `to` less its
//! `from` (zigzag). Times close together take a byte or two each; the
//! differences wrap, so that any times come back as they were. A shift of
//! every time (the summary made the trace's) changes the base, not the
//! bytes.

use gaspard_format::varint::{put_u64, unzigzag, zigzag, Reader};
use serde::{Deserialize, Serialize};

/// Pairs of times in the order added.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Packed")]
pub struct Pairs {
    /// How many pairs.
    len: usize,
    /// What the first pair's `from` is written from.
    base: u64,
    /// The last pair's `from` (the base before the first).
    last: u64,
    /// The latest time of any pair.
    latest: u64,
    /// The pairs, packed as the module says.
    bytes: Vec<u8>,
}

/// [`Pairs`] as a rank of `gaspard report --mpi` sends them, checked before
/// they are taken: a pair takes 2 bytes at least, so that a count its bytes
/// cannot hold (a damaged message) is refused.
#[derive(Deserialize)]
struct Packed {
    len: usize,
    base: u64,
    last: u64,
    latest: u64,
    bytes: Vec<u8>,
}

impl TryFrom<Packed> for Pairs {
    type Error = String;

    fn try_from(p: Packed) -> Result<Pairs, String> {
        if p.len > p.bytes.len() / 2 {
            return Err(format!(
                "{} pairs of times in {} bytes: a pair takes 2 bytes at least",
                p.len,
                p.bytes.len()
            ));
        }
        Ok(Pairs {
            len: p.len,
            base: p.base,
            last: p.last,
            latest: p.latest,
            bytes: p.bytes,
        })
    }
}

impl FromIterator<(u64, u64)> for Pairs {
    fn from_iter<I: IntoIterator<Item = (u64, u64)>>(pairs: I) -> Pairs {
        let mut p = Pairs::default();
        for pair in pairs {
            p.push(pair);
        }
        p
    }
}

impl Pairs {
    /// Adds a pair after the others.
    #[inline]
    pub fn push(&mut self, (from, to): (u64, u64)) {
        put_u64(&mut self.bytes, zigzag(from.wrapping_sub(self.last) as i64));
        put_u64(&mut self.bytes, zigzag(to.wrapping_sub(from) as i64));
        self.last = from;
        self.latest = self.latest.max(from).max(to);
        self.len += 1;
    }

    /// Adds the pairs of `other` after these, leaving it empty.
    pub fn append(&mut self, other: &mut Pairs) {
        let other = std::mem::take(other);
        if self.len == 0 {
            *self = other;
            return;
        }
        for pair in other.iter() {
            self.push(pair);
        }
    }

    /// Gives back the room left for more pairs.
    pub fn shrink_to_fit(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// How many pairs.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pairs in order. Bytes not written (a rank's message cut short)
    /// end them.
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            bytes: Reader::new(&self.bytes),
            left: self.len,
            from: self.base,
        }
    }

    /// The same pairs, each time `t` made `t.saturating_add(after)`.
    pub(crate) fn rebase(&mut self, after: u64) {
        match self.latest.checked_add(after) {
            // No time saturates: each is shifted by as much.
            Some(latest) => {
                self.base = self.base.wrapping_add(after);
                self.last = self.last.wrapping_add(after);
                self.latest = latest;
            }
            None => {
                *self = self
                    .iter()
                    .map(|(a, b)| (a.saturating_add(after), b.saturating_add(after)))
                    .collect()
            }
        }
    }
}

/// The pairs of a [`Pairs`], in order.
#[derive(Debug)]
pub struct Iter<'a> {
    bytes: Reader<'a>,
    left: usize,
    from: u64,
}

impl Iterator for Iter<'_> {
    type Item = (u64, u64);

    #[inline]
    fn next(&mut self) -> Option<(u64, u64)> {
        if self.left == 0 {
            return None;
        }
        let read = self.bytes.u64().and_then(|a| Ok((a, self.bytes.u64()?)));
        let Ok((gap, len)) = read else {
            self.left = 0;
            return None;
        };
        self.left -= 1;
        self.from = self.from.wrapping_add(unzigzag(gap) as u64);
        Some((self.from, self.from.wrapping_add(unzigzag(len) as u64)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::Pairs;

    /// Any pairs come back as they were, in order: times far apart, going
    /// back, at both ends of u64, pairs whose `to` is before their `from`;
    /// appended, mapped, and through serde; and times close together take a
    /// few bytes.
    #[test]
    fn pairs_come_back_as_they_were() {
        let close_by = || -> Pairs { (0..1000u64).map(|i| (i * 1500, i * 1500 + 90)).collect() };
        let mut next = crate::testing::xorshift(7);
        let mut all: Vec<(u64, u64)> = vec![
            (0, 0),
            (u64::MAX, 0),
            (0, u64::MAX),
            (u64::MAX, u64::MAX),
            (5, 3),
            (1 << 63, (1 << 63) - 1),
        ];
        let mut t = 1_000_000u64;
        for i in 0..2000 {
            let pair = match i % 5 {
                0 => (next(), next()),
                1 => (t - (next() % 1000), t + next() % 50),
                _ => {
                    t += next() % 3000;
                    (t, t + next() % 200)
                }
            };
            all.push(pair);
        }
        let p: Pairs = all.iter().copied().collect();
        assert_eq!(p.len(), all.len());
        assert_eq!(p.iter().collect::<Vec<_>>(), all);
        let (mut a, mut b): (Pairs, Pairs) = (
            all[..700].iter().copied().collect(),
            all[700..].iter().copied().collect(),
        );
        a.append(&mut b);
        assert!(b.is_empty());
        assert_eq!(a, p);
        let mut empty = Pairs::default();
        empty.append(&mut a);
        assert_eq!(empty, p);
        // Shifted, by as much or saturating.
        for after in [10, u64::MAX - 5] {
            let (mut shifted, mut near) = (p.clone(), close_by());
            shifted.rebase(after);
            near.rebase(after);
            let shift = |&(x, y): &(u64, u64)| (x.saturating_add(after), y.saturating_add(after));
            let want: Vec<_> = all.iter().map(shift).collect();
            assert_eq!(shifted.iter().collect::<Vec<_>>(), want);
            let want: Vec<_> = close_by()
                .iter()
                .collect::<Vec<_>>()
                .iter()
                .map(shift)
                .collect();
            assert_eq!(near.iter().collect::<Vec<_>>(), want);
            // Then pairs added after them.
            near.push((5, 6));
            assert_eq!(near.iter().last(), Some((5, 6)));
        }
        let json = serde_json::to_string(&p).unwrap();
        let back: Pairs = serde_json::from_str(&json).unwrap();
        assert_eq!(back, p);
        // Close together: 2 to 4 bytes a pair.
        assert!(
            close_by().bytes.len() <= 4 * 1000,
            "{}",
            close_by().bytes.len()
        );
    }

    /// Bytes cut short end the pairs where they stop, and a count of pairs
    /// the bytes cannot hold is refused when read from a message.
    #[test]
    fn pairs_cut_short_stop_and_lies_are_refused() {
        let p: Pairs = (0..100u64).map(|i| (i * 300, i * 300 + 7)).collect();
        for cut in 0..p.bytes.len() {
            let q = Pairs {
                bytes: p.bytes[..cut].to_vec(),
                ..p.clone()
            };
            let read: Vec<_> = q.iter().collect();
            assert!(read.len() < 100);
            assert_eq!(read[..], p.iter().collect::<Vec<_>>()[..read.len()]);
        }
        let lie = r#"{"len":1000,"base":0,"last":0,"latest":0,"bytes":[0,0,0,0]}"#;
        let err = serde_json::from_str::<Pairs>(lie).unwrap_err().to_string();
        assert!(err.contains("1000 pairs of times in 4 bytes"), "{err}");
    }
}
