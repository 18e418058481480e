//! Shapes of events: what tells events apart for the analyses that keep
//! something per kind, callsite, user event or function (and per phase and
//! flags, which tell where an argument is), and a table where an analysis
//! remembers what it found for each shape it met.

use crate::trace::Event;

/// An event's kind, phase, flags, callsite, user event and function, in two
/// words.
pub(crate) type Shape = (u64, u64);

/// The shape of `e`.
#[inline(always)]
pub(crate) fn of(e: &Event) -> Shape {
    at_site(e, e.callsite)
}

/// The shape of `e` were its callsite `callsite` (an interval's callsite is
/// its START's, whatever its END's).
#[inline(always)]
pub(crate) fn at_site(e: &Event, callsite: u32) -> Shape {
    (
        u64::from(e.kind)
            | u64::from(e.phase) << 16
            | u64::from(e.flags) << 24
            | u64::from(callsite) << 32,
        u64::from(e.text) | u64::from(e.user) << 32,
    )
}

/// What an analysis found for each shape of events it met, in a
/// direct-mapped table: a stream has few shapes, and an event mostly finds
/// its shape's entry at the first try; a shape pushed out by another is
/// found again the slow way.
#[derive(Debug)]
pub(crate) struct Table<V> {
    /// Each entry's shape and what was found for it: a fixed number, so
    /// that an entry's index needs no check.
    entries: Box<[(Option<Shape>, V); ENTRIES]>,
}

/// How many entries a [`Table`] has (a power of two)...
pub(crate) const ENTRIES: usize = 1 << ENTRY_BITS;
/// ... and the bits of an entry's index.
const ENTRY_BITS: u32 = 10;

impl<V: Copy + Default> Table<V> {
    /// An empty table (of [`ENTRIES`] entries, whatever the stream: only
    /// those of the shapes met are touched).
    pub(crate) fn new() -> Table<V> {
        Table {
            entries: crate::intervals::zeros(),
        }
    }

    #[inline(always)]
    fn at(&self, (a, b): Shape) -> usize {
        let h = (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> (64 - ENTRY_BITS)) as usize
    }

    /// What was found for `shape`, if it is still in the table.
    #[inline(always)]
    pub(crate) fn get(&self, shape: Shape) -> Option<V> {
        match self.entries[self.at(shape)] {
            (Some(k), v) if k == shape => Some(v),
            _ => None,
        }
    }

    /// Remembers `v` for `shape` (in place of what its entry held).
    #[inline(always)]
    pub(crate) fn set(&mut self, shape: Shape, v: V) {
        let at = self.at(shape);
        self.entries[at] = (Some(shape), v);
    }
}
