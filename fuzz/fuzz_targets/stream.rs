//! A whole stream file through the reader: file header, chunk walk with
//! resynchronisation, checksums, and the decoder, as `gaspard` reads traces.
//!
//! The first byte chooses how: even, the rest is read as it is; odd, the
//! checksum of every chunk header found in the rest is made right first, so
//! that damaged payloads reach the decoder (random bytes never match a
//! CRC-32).
#![no_main]

use gaspard_format::chunk::{ChunkHeader, CHUNK_HEADER_LEN, CHUNK_MAGIC};
use gaspard_format::stream;
use libfuzzer_sys::fuzz_target;

fn fix_checksums(b: &mut [u8]) {
    let mut pos = 0;
    while pos + CHUNK_HEADER_LEN <= b.len() {
        if &b[pos..pos + 4] != CHUNK_MAGIC {
            pos += 1;
            continue;
        }
        let Some(h) = ChunkHeader::parse(&b[pos..]) else {
            pos += 1;
            continue;
        };
        let start = pos + CHUNK_HEADER_LEN;
        let Some(end) = start
            .checked_add(h.payload_len as usize)
            .filter(|&e| e <= b.len())
        else {
            pos += 1;
            continue;
        };
        let head = h.to_bytes(&b[start..end]);
        b[pos..start].copy_from_slice(&head);
        pos = end;
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 {
        fix_checksums(&mut bytes);
    }
    let Ok(f) = stream::read("fuzz.gst", &bytes) else {
        return;
    };
    assert!(f.header.len <= bytes.len());
    for (_, c) in &f.chunks {
        for e in &c.events {
            let _ = c.args_of(e);
        }
    }
    if !f.problems.is_empty() {
        assert!(f.damaged, "problems without damage: {:?}", f.problems);
    }
});
