//! LEB128 variable-length integers and zigzag mapping.

/// Appends `v` as unsigned LEB128.
#[inline]
pub fn put_u64(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zigzag-mapped as LEB128.
#[inline]
pub fn put_i64(out: &mut Vec<u8>, v: i64) {
    put_u64(out, zigzag(v));
}

/// Maps signed to unsigned so that small magnitudes stay small.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// The value of the LEB128 value of one to eight bytes that `w` (eight
/// bytes, little-endian) begins with, and its length in bytes; `None` when
/// it is longer.
#[inline(always)]
fn from_word(w: u64) -> Option<(u64, usize)> {
    let stops = !w & 0x8080_8080_8080_8080;
    if stops == 0 {
        return None;
    }
    // The bits up to the end of the first byte whose last bit is clear:
    // 8, 16, ... 64.
    let bits = stops.trailing_zeros() + 1;
    let x = w & (u64::MAX >> (64 - bits));
    // Seven bits of each byte put together, in pairs of bytes, then of two
    // bytes, then of four.
    let x = (x & 0x007f_007f_007f_007f) | ((x & 0x7f00_7f00_7f00_7f00) >> 1);
    let x = (x & 0x0000_3fff_0000_3fff) | ((x & 0x3fff_0000_3fff_0000) >> 2);
    let x = (x & 0x0000_0000_0fff_ffff) | ((x & 0x0fff_ffff_0000_0000) >> 4);
    Some((x, (bits / 8) as usize))
}

/// A cursor over a byte slice that reads LEB128 values.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

/// The payload ended inside a value, or a value was too long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated;

impl<'a> Reader<'a> {
    /// Starts at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// Bytes consumed so far.
    pub fn pos(&self) -> usize {
        self.pos
    }
    /// True when every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }
    /// Reads one byte.
    #[inline]
    pub fn byte(&mut self) -> Result<u8, Truncated> {
        let b = *self.buf.get(self.pos).ok_or(Truncated)?;
        self.pos += 1;
        Ok(b)
    }
    /// Reads an unsigned LEB128 value.
    #[inline(always)]
    pub fn u64(&mut self) -> Result<u64, Truncated> {
        // Most values of a trace fit in one byte: read in line.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.u64_long()
    }
    /// Reads an unsigned LEB128 value of any length up to eight bytes
    /// without a branch on its length (one branch between one or two bytes
    /// and more, the first few instructions fewer): for values whose length
    /// varies from one to the next (times between events), where
    /// [`Reader::u64`]'s test of the first byte is often guessed wrong.
    #[inline(always)]
    pub fn u64_any(&mut self) -> Result<u64, Truncated> {
        if let Some(b) = self.buf.get(self.pos..self.pos + 8) {
            let w = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            // One or two bytes (most times between events) without a
            // branch on which.
            if w & 0x8080 != 0x8080 {
                let two = (w >> 7) & 1;
                self.pos += 1 + two as usize;
                return Ok((w & 0x7f) | (((w >> 1) & 0x3f80) & two.wrapping_neg()));
            }
            if let Some((x, n)) = from_word(w) {
                self.pos += n;
                return Ok(x);
            }
        }
        self.u64()
    }
    /// [`Reader::u64`] for values of three bytes or more (and the errors):
    /// eight bytes read at once where there are eight, byte by byte
    /// otherwise ([`Reader::u64_long`]).
    #[inline(never)]
    fn u64_wide(&mut self) -> Result<u64, Truncated> {
        if let Some(b) = self.buf.get(self.pos..self.pos + 8) {
            let w = u64::from_le_bytes(b.try_into().unwrap_or([0; 8]));
            if let Some((x, n)) = from_word(w) {
                self.pos += n;
                return Ok(x);
            }
        }
        self.u64_long()
    }

    /// [`Reader::u64`] for values of more than one byte (and the errors).
    #[inline(never)]
    fn u64_long(&mut self) -> Result<u64, Truncated> {
        // Two bytes (times between events, mostly) without the loop.
        if let Some(&[b0, b1]) = self.buf.get(self.pos..self.pos + 2) {
            if b0 >= 0x80 && b1 < 0x80 {
                self.pos += 2;
                return Ok(u64::from(b0 & 0x7f) | u64::from(b1) << 7);
            }
        }
        let mut v = 0u64;
        let mut shift = 0u32;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(Truncated);
            }
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
            shift += 7;
        }
    }
    /// Reads a zigzag LEB128 value.
    #[inline]
    pub fn i64(&mut self) -> Result<i64, Truncated> {
        self.u64().map(unzigzag)
    }
    /// Adds to each of `words` the next zigzag LEB128 value, as reading
    /// them one by one with [`Reader::i64`] does, with the place read kept
    /// apart until the last rather than written back after each value:
    /// fewer instructions.
    #[inline]
    pub fn add_i64s(&mut self, words: &mut [u64]) -> Result<(), Truncated> {
        let buf = self.buf;
        let mut pos = self.pos;
        for w in words.iter_mut() {
            let v = match buf.get(pos) {
                Some(&b) if b < 0x80 => {
                    pos += 1;
                    u64::from(b)
                }
                // Two bytes (addresses apart by a few kilobytes), in line.
                _ if matches!(buf.get(pos + 1), Some(&c) if c < 0x80) => {
                    let (b, c) = (buf[pos], buf[pos + 1]);
                    pos += 2;
                    u64::from(b & 0x7f) | u64::from(c) << 7
                }
                _ => {
                    self.pos = pos;
                    let v = self.u64_wide()?;
                    pos = self.pos;
                    v
                }
            };
            *w = w.wrapping_add(unzigzag(v) as u64);
        }
        self.pos = pos;
        Ok(())
    }
    /// Skips `n` LEB128 values (signed or not), without reading them: as
    /// many bytes as have their last bit clear. Fails as [`Reader::u64`]
    /// does on a value cut short or longer than ten bytes.
    #[inline]
    pub fn skip_values(&mut self, n: usize) -> Result<(), Truncated> {
        // One pass over the bytes: a value ends at a byte whose last bit is
        // clear, and may not take more than ten.
        // On error the reader stays at the start of the value that failed.
        let (mut left, mut pos, mut len) = (n, self.pos, 0);
        while left > 0 {
            let Some(&b) = self.buf.get(pos) else {
                self.pos = pos - len;
                return Err(Truncated);
            };
            pos += 1;
            len += 1;
            if b & 0x80 == 0 {
                left -= 1;
                len = 0;
            } else if len == 10 {
                self.pos = pos - len;
                return Err(Truncated);
            }
        }
        self.pos = pos;
        Ok(())
    }
    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        let end = self.pos.checked_add(n).ok_or(Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Truncated)?;
        self.pos = end;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `skip_values` as it was first written, value by value.
    fn skip_slowly(r: &mut Reader<'_>, n: usize) -> Result<(), Truncated> {
        for _ in 0..n {
            let rest = r.buf.get(r.pos..).ok_or(Truncated)?;
            let len = rest.iter().position(|&b| b & 0x80 == 0).ok_or(Truncated)? + 1;
            if len > 10 {
                return Err(Truncated);
            }
            r.pos += len;
        }
        Ok(())
    }

    #[test]
    fn skipping_values_stops_where_reading_them_would() {
        let mut out = Vec::new();
        for v in [0u64, 127, 128, 300, 1 << 40, u64::MAX, 5] {
            put_u64(&mut out, v);
        }
        // Eleven bytes of one value: too long.
        let mut long = vec![0x80u8; 10];
        long.push(1);
        let bufs = [
            out.clone(),
            out[..out.len() - 2].to_vec(),
            [&out[..4], &long[..]].concat(),
        ];
        for buf in &bufs {
            for n in 0..9 {
                let (mut a, mut b) = (Reader::new(buf), Reader::new(buf));
                assert_eq!(
                    a.skip_values(n),
                    skip_slowly(&mut b, n),
                    "n {n} buf {buf:?}"
                );
                assert_eq!(a.pos(), b.pos(), "n {n} buf {buf:?}");
            }
        }
    }

    #[test]
    fn deltas_added_together_as_read_one_by_one() {
        let mut out = Vec::new();
        // Values of one to ten bytes, followed by more than eight bytes or
        // not.
        for v in [
            0i64,
            -1,
            63,
            -64,
            64,
            300,
            1 << 20,
            -(1 << 30),
            i64::MIN,
            1 << 40,
            -(1 << 55),
            i64::MAX,
            7,
            1 << 62,
            -(1 << 48),
            5,
        ] {
            put_i64(&mut out, v);
        }
        // Cut anywhere (within a value too), and read for more or fewer
        // words than there are.
        for cut in 0..=out.len() {
            let buf = &out[..cut];
            for n in 0..11 {
                let base: Vec<u64> = (0..n as u64).map(|i| i * 1000).collect();
                let (mut a, mut b) = (Reader::new(buf), Reader::new(buf));
                let mut together = base.clone();
                let got = a.add_i64s(&mut together);
                let mut one_by_one = base.clone();
                let mut want = Ok(());
                for w in one_by_one.iter_mut() {
                    match b.i64() {
                        Ok(v) => *w = w.wrapping_add(v as u64),
                        Err(e) => {
                            want = Err(e);
                            break;
                        }
                    }
                }
                assert_eq!(got, want, "cut {cut} n {n}");
                assert_eq!(a.pos(), b.pos(), "cut {cut} n {n}");
                if want.is_ok() {
                    assert_eq!(together, one_by_one, "cut {cut} n {n}");
                }
            }
        }
    }

    #[test]
    fn two_byte_values_and_the_end_of_the_buffer() {
        for v in [128u64, 255, 300, 16_383, 16_384, 2_097_151] {
            let mut out = Vec::new();
            put_u64(&mut out, v);
            let mut r = Reader::new(&out);
            assert_eq!(r.u64(), Ok(v));
            assert!(r.is_empty());
            // Cut short by one byte: an error, not another value.
            let mut r = Reader::new(&out[..out.len() - 1]);
            assert_eq!(r.u64(), Err(Truncated));
        }
    }

    #[test]
    fn round_trip() {
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut out = Vec::new();
        for v in vals {
            put_u64(&mut out, v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            put_i64(&mut out, v);
        }
        let mut r = Reader::new(&out);
        for v in vals {
            assert_eq!(r.u64().unwrap(), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            assert_eq!(r.i64().unwrap(), v);
        }
        assert!(r.is_empty());
        assert_eq!(r.u64(), Err(Truncated));
    }

    #[test]
    fn overlong_is_an_error() {
        let bad = [0xffu8; 11];
        assert_eq!(Reader::new(&bad).u64(), Err(Truncated));
    }

    #[test]
    fn any_length_reads_as_the_byte_by_byte_reading() {
        // Every length from one to ten bytes; the buffer cut short at each
        // of its last 24 bytes (the last values are read the slow way, and
        // the one cut, as an error) and at a few places near its start.
        let mut vals: Vec<u64> = (0..64).map(|s| 1u64 << s).collect();
        vals.extend((0..64).map(|s| (1u64 << s) - 1));
        vals.extend([u64::MAX, 0x7f, 0x80, 0x3fff, 0x4000, 0x0123_4567_89ab_cdef]);
        let mut out = Vec::new();
        for &v in &vals {
            put_u64(&mut out, v);
        }
        for cut in (out.len().saturating_sub(24)..=out.len()).chain([0, 1, 5]) {
            let buf = &out[..cut];
            let (mut a, mut b) = (Reader::new(buf), Reader::new(buf));
            loop {
                let (x, y) = (a.u64(), b.u64_any());
                assert_eq!(x, y, "cut at {cut}, place {}", a.pos());
                assert_eq!(a.pos(), b.pos());
                if x.is_err() {
                    break;
                }
            }
        }
        let mut r = Reader::new(&out);
        for &v in &vals {
            assert_eq!(r.u64_any(), Ok(v));
        }
        assert!(r.is_empty());
        // Longer than ten bytes: an error, as for `u64`.
        let bad = [0xffu8; 11];
        assert_eq!(Reader::new(&bad).u64_any(), Err(Truncated));
    }
}
