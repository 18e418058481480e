//! Reading a whole stream file: its header, then its chunks one after the
//! other, resynchronising on the next chunk magic after damage. Everything
//! wrong is described in words; nothing in the input can make it panic.

use crate::chunk::{self, ChunkHeader, FileHeader, HeaderError, CHUNK_HEADER_LEN, CHUNK_MAGIC};
use crate::codec::{self, DecodedChunk};

/// What could be read from a stream file.
#[derive(Debug, Default)]
pub struct StreamFile {
    /// The file header.
    pub header: FileHeader,
    /// Chunks whose checksum matched, in file order, each with what could be
    /// decoded of it.
    pub chunks: Vec<(ChunkHeader, DecodedChunk)>,
    /// What was wrong, one sentence each, naming the file.
    pub problems: Vec<String>,
    /// True when the stream ends early, lost chunks or holds damage.
    pub damaged: bool,
}

/// Reads the stream file `data`; `name` names it in the problems. Only a
/// header that cannot be read is an error: damage after it is skipped and
/// described in [`StreamFile::problems`].
pub fn read(name: &str, data: &[u8]) -> Result<StreamFile, HeaderError> {
    let mut chunks = Vec::new();
    let w = walk(name, data, |h, payload| {
        let mut d = DecodedChunk::default();
        let r = codec::decode(h, payload, &mut d);
        chunks.push((*h, d));
        r
    })?;
    Ok(StreamFile {
        header: w.header,
        chunks,
        problems: w.problems,
        damaged: w.damaged,
    })
}

/// What [`walk`] found of a stream file besides its chunks.
#[derive(Debug, Default)]
pub struct Walk {
    /// The file header.
    pub header: FileHeader,
    /// What was wrong, one sentence each, naming the file.
    pub problems: Vec<String>,
    /// True when the stream ends early, lost chunks or holds damage.
    pub damaged: bool,
}

/// Walks the stream file `data` as [`read`] does, handing each chunk whose
/// checksum matches to `chunk` (which may decode it, into buffers of its
/// own; the error it returns is reported as [`read`] reports it).
pub fn walk<F>(name: &str, data: &[u8], mut chunk: F) -> Result<Walk, HeaderError>
where
    F: FnMut(&ChunkHeader, &[u8]) -> Result<(), codec::DecodeError>,
{
    let header = chunk::parse_file_header(data)?;
    let mut f = Walk {
        header,
        ..Default::default()
    };
    let problems = &mut f.problems;
    let mut pos = f.header.len;
    let mut expect_seq = 0u32;
    // Bytes the checksums may still cover. Chunk headers whose lengths reach
    // over each other (made so, never seen on a real disk) would make every
    // byte be checksummed again for each of them: past four times the file,
    // the rest is given up, so reading stays linear.
    let mut checksum_budget = data.len().saturating_mul(4).saturating_add(1 << 20);
    while pos < data.len() {
        let rest = &data[pos..];
        let Some(h) = ChunkHeader::parse(rest) else {
            if rest.len() < CHUNK_HEADER_LEN && CHUNK_MAGIC.starts_with(&rest[..rest.len().min(4)])
            {
                problems.push(format!(
                    "{name}: truncated at byte {pos}: the last chunk header is incomplete (events after chunk {} are missing)",
                    expect_seq.saturating_sub(1)
                ));
                f.damaged = true;
                break;
            }
            // Find the next chunk.
            let next = rest
                .windows(4)
                .skip(1)
                .position(|w| w == CHUNK_MAGIC)
                .map(|i| i + 1);
            f.damaged = true;
            match next {
                Some(skip) => {
                    problems.push(format!(
                        "{name}: {skip} damaged bytes at offset {pos} skipped"
                    ));
                    pos += skip;
                    continue;
                }
                None => {
                    problems.push(format!(
                        "{name}: {} damaged bytes at offset {pos} to the end",
                        rest.len()
                    ));
                    break;
                }
            }
        };
        let plen = h.payload_len as usize;
        if h.payload_len > chunk::MAX_PAYLOAD {
            problems.push(format!(
                "{name}: chunk at offset {pos} claims {plen} bytes; treated as damage"
            ));
            f.damaged = true;
            pos += 4;
            continue;
        }
        let end = pos + CHUNK_HEADER_LEN + plen;
        // The next chunk magic after this header, before `limit`.
        let next_magic = |limit: usize| {
            let from = pos + 4;
            data.get(from..limit.min(data.len()))
                .and_then(|b| b.windows(4).position(|w| w == CHUNK_MAGIC))
                .map(|i| from + i)
        };
        if end > data.len() {
            if let Some(next) = next_magic(data.len()) {
                // A chunk follows: this one's length is damaged, not cut.
                problems.push(format!(
                    "{name}: chunk {} at offset {pos} claims {plen} bytes, past the chunk at offset {next} \
                     and the end of the file: its header is damaged; its {} events are skipped",
                    h.seq, h.events
                ));
                f.damaged = true;
                pos = next;
                continue;
            }
            problems.push(format!(
                "{name}: truncated: chunk {} (from {} ns-ticks) has {} of its {plen} bytes; its {} events are missing",
                h.seq,
                h.base_ts,
                data.len() - pos - CHUNK_HEADER_LEN,
                h.events
            ));
            f.damaged = true;
            break;
        }
        let payload = &data[pos + CHUNK_HEADER_LEN..end];
        if payload.len() > checksum_budget {
            problems.push(format!(
                "{name}: from offset {pos} on, chunk headers overlap each other over and over: \
                 the rest of the file ({} bytes) is too damaged to read",
                data.len() - pos
            ));
            f.damaged = true;
            break;
        }
        checksum_budget -= payload.len();
        if !ChunkHeader::verify(rest, payload) {
            problems.push(format!(
                "{name}: chunk {} at offset {pos} fails its checksum; its {} events are skipped",
                h.seq, h.events
            ));
            f.damaged = true;
            expect_seq = h.seq.wrapping_add(1);
            // A damaged length may reach over the chunks that follow: go on
            // from the next chunk magic inside, if there is one.
            pos = next_magic(end).unwrap_or(end);
            continue;
        }
        if h.seq > expect_seq {
            problems.push(format!(
                "{name}: chunks {expect_seq}..{} are missing",
                h.seq - 1
            ));
            f.damaged = true;
        } else if h.seq < expect_seq {
            problems.push(format!(
                "{name}: chunk {} at offset {pos} comes again or out of order (chunk {expect_seq} was expected); its {} events are read where they stand",
                h.seq, h.events
            ));
            f.damaged = true;
        }
        expect_seq = h.seq.wrapping_add(1);
        if let Err(e) = chunk(&h, payload) {
            problems.push(format!(
                "{name}: chunk {}: cannot decode at byte {}: {}",
                h.seq, e.offset, e.what
            ));
            f.damaged = true;
        }
        pos = end;
    }
    Ok(f)
}

/// The chunk headers of the stream file `data`, hopping from header to
/// header without reading payloads or checking anything (damage ends the
/// list): what a reading will find, unless the file is damaged.
pub fn chunk_headers(data: &[u8]) -> Vec<ChunkHeader> {
    let Ok(h) = chunk::parse_file_header(data) else {
        return Vec::new();
    };
    let mut pos = h.len;
    let mut out = Vec::new();
    while let Some(c) = data.get(pos..).and_then(ChunkHeader::parse) {
        pos = pos
            .saturating_add(CHUNK_HEADER_LEN)
            .saturating_add(c.payload_len as usize);
        out.push(c);
    }
    out
}

/// The events the chunk headers of the stream file `data` announce, hopping
/// from header to header without reading payloads or checking anything: a
/// size to reserve before decoding, at most one event per byte of `data`.
pub fn announced_in(data: &[u8]) -> usize {
    chunk_headers(data)
        .iter()
        .fold(0usize, |n, c| n.saturating_add(c.events as usize))
        .min(data.len())
}

/// The events a stream file's chunk headers announce, read from the headers
/// alone (no checksum checked, nothing decoded): an estimate of what
/// reading it will find, cheap on any size. Damage ends the count.
pub fn announced_events(path: &std::path::Path) -> std::io::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let mut head = vec![0u8; 64 << 10];
    let n = f.read(&mut head)?;
    let Ok(h) = chunk::parse_file_header(&head[..n]) else {
        return Ok(0);
    };
    let mut pos = h.len as u64;
    let mut events = 0u64;
    let mut b = [0u8; CHUNK_HEADER_LEN];
    while pos + CHUNK_HEADER_LEN as u64 <= len {
        f.seek(SeekFrom::Start(pos))?;
        f.read_exact(&mut b)?;
        let Some(c) = ChunkHeader::parse(&b) else {
            break;
        };
        events += u64::from(c.events);
        pos += CHUNK_HEADER_LEN as u64 + u64::from(c.payload_len);
    }
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::file_header;

    fn chunk(seq: u32) -> Vec<u8> {
        let h = ChunkHeader {
            seq,
            ..Default::default()
        };
        h.to_bytes(&[]).to_vec()
    }

    #[test]
    fn announced_events_come_from_the_chunk_headers() {
        let mut b = file_header(&[("stream", "0".into())]);
        for (seq, events) in [(0u32, 7u32), (1, 5)] {
            let payload = vec![0u8; 10];
            let h = ChunkHeader {
                seq,
                events,
                ..Default::default()
            };
            b.extend(h.to_bytes(&payload));
            b.extend(&payload);
        }
        let dir = std::env::temp_dir().join(format!("gaspard-announced-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("s.gst");
        std::fs::write(&p, &b).unwrap();
        assert_eq!(announced_events(&p).unwrap(), 12);
        assert_eq!(announced_in(&std::fs::read(&p).unwrap()), 12);
        // Cut inside the second chunk's header: the first one's count.
        let first_end = b.len() - 10 - CHUNK_HEADER_LEN;
        std::fs::write(&p, &b[..first_end + 20]).unwrap();
        assert_eq!(announced_events(&p).unwrap(), 7);
        std::fs::write(&p, b"nonsense").unwrap();
        assert_eq!(announced_events(&p).unwrap(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn chunks_out_of_order_are_named_not_wrapped() {
        let mut b = file_header(&[("stream", "0".into())]);
        for seq in [0, 1, 1, 0, 5] {
            b.extend(chunk(seq));
        }
        let f = read("s.gst", &b).unwrap();
        assert_eq!(f.chunks.len(), 5);
        assert!(f.damaged);
        assert_eq!(f.problems.len(), 3, "{:?}", f.problems);
        assert!(
            f.problems[0].contains("chunk 1 at offset")
                && f.problems[0].contains("chunk 2 was expected")
        );
        assert!(
            f.problems[1].contains("chunk 0 at offset")
                && f.problems[1].contains("chunk 2 was expected")
        );
        assert!(
            f.problems[2].contains("chunks 1..4 are missing"),
            "{:?}",
            f.problems
        );
    }

    #[test]
    fn a_damaged_length_does_not_hide_the_chunks_after_it() {
        let mut b = file_header(&[]);
        let start = b.len();
        for seq in 0..4 {
            b.extend(chunk(seq));
        }
        let at = |k: usize| start + k * CHUNK_HEADER_LEN;
        // Chunk 1 reaches over chunk 2 (checksum fails), chunk 3's length
        // reaches past the end of the file, yet chunk 2 is read.
        let mut d = b.clone();
        d[at(1) + 16] = 100;
        let f = read("s.gst", &d).unwrap();
        let seqs: Vec<u32> = f.chunks.iter().map(|(h, _)| h.seq).collect();
        assert_eq!(seqs, [0, 2, 3], "{:?}", f.problems);
        assert!(f.problems[0].contains("chunk 1 at offset") && f.problems[0].contains("checksum"));
        let mut d = b.clone();
        d[at(1) + 18] = 1;
        let f = read("s.gst", &d).unwrap();
        let seqs: Vec<u32> = f.chunks.iter().map(|(h, _)| h.seq).collect();
        assert_eq!(seqs, [0, 2, 3], "{:?}", f.problems);
        assert!(
            f.problems[0].contains("claims 65536 bytes, past the chunk at offset"),
            "{:?}",
            f.problems
        );
        // The last chunk cut short is still said to be truncated.
        let f = read("s.gst", &b[..b.len() - 1]).unwrap();
        assert!(
            f.problems[0].contains("truncated at byte"),
            "{:?}",
            f.problems
        );
    }

    #[test]
    fn overlapping_chunk_headers_are_read_in_linear_time() {
        // 100000 headers, each claiming the rest of the file as its payload:
        // checking every claim would checksum 300 GB.
        let mut b = file_header(&[]);
        let start = b.len();
        let n = 100_000;
        b.resize(start + n * CHUNK_HEADER_LEN, 0);
        let len = b.len();
        for k in 0..n {
            let at = start + k * CHUNK_HEADER_LEN;
            b[at..at + 4].copy_from_slice(CHUNK_MAGIC);
            let plen = (len - at - CHUNK_HEADER_LEN) as u32;
            b[at + 16..at + 20].copy_from_slice(&plen.to_le_bytes());
        }
        let t = std::time::Instant::now();
        let f = read("s.gst", &b).unwrap();
        assert!(t.elapsed().as_secs() < 30, "{:?}", t.elapsed());
        assert!(f.chunks.is_empty() && f.damaged);
        assert!(
            f.problems.last().unwrap().contains("too damaged to read"),
            "{:?}",
            f.problems.last()
        );
    }

    #[test]
    fn a_huge_payload_length_is_damage_not_an_allocation() {
        let mut b = file_header(&[]);
        let mut c = chunk(0);
        c[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        b.extend(&c);
        let f = read("s.gst", &b).unwrap();
        assert!(f.chunks.is_empty() && f.damaged);
        assert!(
            f.problems[0].contains("claims 4294967295 bytes"),
            "{:?}",
            f.problems
        );
        assert_eq!(
            read("s.gst", b"GASPARD\n").unwrap_err(),
            HeaderError::Truncated
        );
    }
}
