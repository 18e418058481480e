//! The seed corpus of the fuzz targets (`fuzz/corpus`, taken from a real
//! trace) still reads without a problem: when the format changes, the seeds
//! must be made again, or the fuzzers would start from rejected input.

use std::path::PathBuf;

use gaspard_format::{chunk, manifest::Manifest, profile::ProfileFile, stream, user};

fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed-")
        })
        .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no seeds in {}", dir.display());
    v
}

#[test]
fn stream_and_chunk_seeds_are_whole_traces() {
    for (name, b) in seeds("stream") {
        // The first byte is the target's mode.
        let f = stream::read(&name, &b[1..]).unwrap();
        assert!(f.problems.is_empty(), "{name}: {:?}", f.problems);
        assert!(
            f.chunks.iter().map(|(_, c)| c.events.len()).sum::<usize>() > 10,
            "{name}"
        );
    }
    for (name, b) in seeds("chunk") {
        let h = chunk::ChunkHeader::parse(&b).unwrap_or_else(|| panic!("{name}"));
        let end = chunk::CHUNK_HEADER_LEN + h.payload_len as usize;
        assert!(
            chunk::ChunkHeader::verify(&b, &b[chunk::CHUNK_HEADER_LEN..end]),
            "{name}"
        );
    }
    for (name, b) in seeds("header") {
        let h = chunk::parse_file_header(&b).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(h.get("pts_bytes").is_some(), "{name}");
    }
}

#[test]
fn text_seeds_parse() {
    for (name, b) in seeds("manifest") {
        let m = Manifest::parse(&String::from_utf8_lossy(&b)).unwrap();
        assert_eq!(m.status, "complete", "{name}");
    }
    for (name, b) in seeds("profile") {
        let p = ProfileFile::parse(&String::from_utf8_lossy(&b)).unwrap();
        assert!(!p.rows.is_empty(), "{name}");
    }
    for (name, b) in seeds("user_format") {
        let fmt = &b[..b.iter().position(|&c| c == 0).unwrap()];
        let s = user::parse_format(&String::from_utf8_lossy(fmt));
        assert!(s.is_ok(), "{name}: {s:?}");
    }
}
