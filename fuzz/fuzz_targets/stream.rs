//! A whole stream file through the reader: file header, chunk walk with
//! resynchronisation, checksums, and the decoder, as `gaspard` reads traces.
#![no_main]

use gaspard_format::stream;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(f) = stream::read("fuzz.gst", data) else {
        return;
    };
    assert!(f.header.len <= data.len());
    for (_, c) in &f.chunks {
        for e in &c.events {
            let _ = c.args_of(e);
        }
    }
    if !f.problems.is_empty() {
        assert!(f.damaged, "problems without damage: {:?}", f.problems);
    }
});
