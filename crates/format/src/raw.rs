//! The in-memory record the hot path writes, before encoding.
//!
//! Written by C (`gaspard_record.h`) and read by the encoder. Keep the two in
//! step; `gaspard_record.h` repeats these constants.
//!
//! ```text
//! word 0: timestamp (clock ticks)
//! word 1: kind:16 | phase:2 | flags:6 | nwords:8 | line:32      (nwords = argument words)
//! word 2: filename pointer:48 | column:16
//! word 3..: arguments, one word each; a pointer-to-shared takes `pts_words` words
//!           (2 words, thread and address, when resolved); a user-event string takes a
//!           length word and its bytes rounded up to whole words.
//! ```

/// Words before the arguments.
pub const HEADER_WORDS: usize = 3;
/// Most argument words one record may carry.
pub const MAX_ARG_WORDS: usize = 255;
/// Flag: pointer-to-shared arguments were resolved to (thread, address).
pub const FLAG_PTS_RESOLVED: u8 = 1;
/// Flag: a user event whose arguments could not be read safely.
pub const FLAG_ARGS_UNREAD: u8 = 2;
/// Phase numbers, as `gasp_evttype_t`.
pub const PHASE_START: u8 = 0;
/// End of an interval.
pub const PHASE_END: u8 = 1;
/// An instant.
pub const PHASE_ATOMIC: u8 = 2;

/// A raw record's header, unpacked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawHeader {
    /// Timestamp in clock ticks.
    pub ts: u64,
    /// Canonical kind.
    pub kind: u16,
    /// START, END or ATOMIC.
    pub phase: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Argument words that follow.
    pub nwords: u8,
    /// Source line.
    pub line: u32,
    /// Source column (saturated at 65535).
    pub col: u16,
    /// Address of the file name, 0 when none.
    pub file: u64,
}

impl RawHeader {
    /// Unpacks the three header words.
    #[inline]
    pub fn unpack(w: &[u64]) -> RawHeader {
        RawHeader {
            ts: w[0],
            kind: w[1] as u16,
            phase: ((w[1] >> 16) & 3) as u8,
            flags: ((w[1] >> 18) & 0x3f) as u8,
            nwords: (w[1] >> 24) as u8,
            line: (w[1] >> 32) as u32,
            col: (w[2] >> 48) as u16,
            file: w[2] & 0xffff_ffff_ffff,
        }
    }
    /// The raw record of an event: its three header words, then its
    /// argument words `args`.
    pub fn record(&self, args: &[u64]) -> Vec<u64> {
        let mut w = self.pack().to_vec();
        w.extend_from_slice(args);
        w
    }

    /// Packs into three header words (as the C side does).
    pub fn pack(&self) -> [u64; 3] {
        [
            self.ts,
            u64::from(self.kind)
                | u64::from(self.phase & 3) << 16
                | u64::from(self.flags & 0x3f) << 18
                | u64::from(self.nwords) << 24
                | u64::from(self.line) << 32,
            (self.file & 0xffff_ffff_ffff) | u64::from(self.col) << 48,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pack_unpack() {
        let h = RawHeader {
            ts: 123456789,
            kind: 300,
            phase: PHASE_END,
            flags: FLAG_PTS_RESOLVED,
            nwords: 7,
            line: 4_000_000_000,
            col: 65535,
            file: 0x7fff_dead_beef,
        };
        assert_eq!(RawHeader::unpack(&h.pack()), h);
    }
}
