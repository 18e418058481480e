//! Stream files and their checksummed, sequence-numbered chunks.
//!
//! ```text
//! stream file := file header, chunk*
//! file header := "GASPARD\n", version:u32le, text_len:u32le, text (key=value lines)
//! chunk       := chunk header (64 bytes), payload
//! ```
//! Each chunk stands alone: its strings, callsites and delta state start
//! afresh, so a damaged chunk costs only its own events.

use crate::FORMAT_VERSION;

/// First bytes of a stream file.
pub const FILE_MAGIC: &[u8; 8] = b"GASPARD\n";
/// First bytes of a chunk.
pub const CHUNK_MAGIC: &[u8; 4] = b"GSPC";
/// Size of a chunk header.
pub const CHUNK_HEADER_LEN: usize = 64;
/// Largest payload a reader accepts.
pub const MAX_PAYLOAD: u32 = 256 << 20;

/// The fixed part of a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkHeader {
    /// Format version of the encoder.
    pub version: u16,
    /// Reserved flags.
    pub flags: u16,
    /// Stream number within the process.
    pub stream: u32,
    /// 0, 1, 2... within the stream.
    pub seq: u32,
    /// Bytes of payload that follow.
    pub payload_len: u32,
    /// Events (not definitions) in the payload.
    pub events: u32,
    /// Timestamp the first delta is taken from.
    pub base_ts: u64,
    /// Timestamp of the last event.
    pub last_ts: u64,
    /// Clock reference: ticks...
    pub ref_ticks: u64,
    /// ...and CLOCK_MONOTONIC nanoseconds read together when the chunk was written.
    pub ref_ns: u64,
    /// CRC-32 of the header (this field zero) and the payload.
    pub crc: u32,
}

impl ChunkHeader {
    /// Serializes, computing the CRC over `payload`.
    pub fn to_bytes(&self, payload: &[u8]) -> [u8; CHUNK_HEADER_LEN] {
        let mut b = [0u8; CHUNK_HEADER_LEN];
        b[0..4].copy_from_slice(CHUNK_MAGIC);
        b[4..6].copy_from_slice(&self.version.to_le_bytes());
        b[6..8].copy_from_slice(&self.flags.to_le_bytes());
        b[8..12].copy_from_slice(&self.stream.to_le_bytes());
        b[12..16].copy_from_slice(&self.seq.to_le_bytes());
        b[16..20].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        b[20..24].copy_from_slice(&self.events.to_le_bytes());
        b[24..32].copy_from_slice(&self.base_ts.to_le_bytes());
        b[32..40].copy_from_slice(&self.last_ts.to_le_bytes());
        b[40..48].copy_from_slice(&self.ref_ticks.to_le_bytes());
        b[48..56].copy_from_slice(&self.ref_ns.to_le_bytes());
        let crc = checksum(&b, payload);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses a header; `None` when the magic is wrong.
    pub fn parse(b: &[u8]) -> Option<ChunkHeader> {
        if b.len() < CHUNK_HEADER_LEN || &b[0..4] != CHUNK_MAGIC {
            return None;
        }
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        Some(ChunkHeader {
            version: u16_at(4),
            flags: u16_at(6),
            stream: u32_at(8),
            seq: u32_at(12),
            payload_len: u32_at(16),
            events: u32_at(20),
            base_ts: u64_at(24),
            last_ts: u64_at(32),
            ref_ticks: u64_at(40),
            ref_ns: u64_at(48),
            crc: u32_at(56),
        })
    }

    /// True when `payload` matches the checksum of header bytes `b`.
    pub fn verify(b: &[u8], payload: &[u8]) -> bool {
        let Some(h) = ChunkHeader::parse(b) else {
            return false;
        };
        let mut z = [0u8; CHUNK_HEADER_LEN];
        z.copy_from_slice(&b[..CHUNK_HEADER_LEN]);
        z[56..60].fill(0);
        checksum(&z, payload) == h.crc
    }
}

fn checksum(header: &[u8; CHUNK_HEADER_LEN], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    let mut z = *header;
    z[56..60].fill(0);
    h.update(&z);
    h.update(payload);
    h.finalize()
}

/// Builds a stream file header from key/value pairs.
pub fn file_header(fields: &[(&str, String)]) -> Vec<u8> {
    let mut text = String::new();
    for (k, v) in fields {
        text.push_str(k);
        text.push('=');
        text.push_str(&crate::manifest::escape(v));
        text.push('\n');
    }
    let mut out = Vec::with_capacity(16 + text.len());
    out.extend_from_slice(FILE_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(text.len() as u32).to_le_bytes());
    out.extend_from_slice(text.as_bytes());
    out
}

/// A parsed stream file header.
#[derive(Debug, Clone, Default)]
pub struct FileHeader {
    /// Format version that wrote the file.
    pub version: u32,
    /// Its key/value fields.
    pub fields: Vec<(String, String)>,
    /// Bytes the header occupies.
    pub len: usize,
}

impl FileHeader {
    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a stream file header could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// The file does not start with the magic bytes.
    NotAStream,
    /// Written by a newer, incompatible format.
    Version(u32),
    /// The header is cut short.
    Truncated,
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::NotAStream => write!(f, "not a gaspard stream file (bad magic)"),
            HeaderError::Version(v) => write!(
                f,
                "written by trace format version {v}, this gaspard reads version {FORMAT_VERSION}"
            ),
            HeaderError::Truncated => write!(f, "file header is truncated"),
        }
    }
}

/// Parses the header at the start of a stream file.
pub fn parse_file_header(b: &[u8]) -> Result<FileHeader, HeaderError> {
    if b.len() < 8 {
        return Err(if FILE_MAGIC.starts_with(b) {
            HeaderError::Truncated
        } else {
            HeaderError::NotAStream
        });
    }
    if &b[0..8] != FILE_MAGIC {
        return Err(HeaderError::NotAStream);
    }
    if b.len() < 16 {
        return Err(HeaderError::Truncated);
    }
    let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
    if version != FORMAT_VERSION {
        return Err(HeaderError::Version(version));
    }
    let len = u32::from_le_bytes(b[12..16].try_into().unwrap()) as usize;
    let text = b.get(16..16 + len).ok_or(HeaderError::Truncated)?;
    let text = String::from_utf8_lossy(text);
    let fields = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), crate::manifest::unescape(v)))
        .collect();
    Ok(FileHeader {
        version,
        fields,
        len: 16 + len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip_and_checksum() {
        let h = ChunkHeader {
            version: 1,
            stream: 3,
            seq: 9,
            events: 2,
            base_ts: 100,
            last_ts: 200,
            ref_ticks: 5,
            ref_ns: 6,
            ..Default::default()
        };
        let payload = b"abcdef";
        let b = h.to_bytes(payload);
        let p = ChunkHeader::parse(&b).unwrap();
        assert_eq!(p.seq, 9);
        assert_eq!(p.payload_len, 6);
        assert!(ChunkHeader::verify(&b, payload));
        assert!(!ChunkHeader::verify(&b, b"abcdeg"));
    }

    #[test]
    fn file_header_round_trip() {
        let b = file_header(&[("stream", "2".into()), ("command", "a b=c\nd".into())]);
        let h = parse_file_header(&b).unwrap();
        assert_eq!(h.get("stream"), Some("2"));
        assert_eq!(h.get("command"), Some("a b=c\nd"));
        assert_eq!(h.len, b.len());
        assert_eq!(
            parse_file_header(&b[..10]).unwrap_err(),
            HeaderError::Truncated
        );
        assert_eq!(
            parse_file_header(b"hello world, x").unwrap_err(),
            HeaderError::NotAStream
        );
    }
}
