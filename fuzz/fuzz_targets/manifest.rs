//! The per-process manifest parser; what it accepts must survive being
//! written and read again unchanged.
#![no_main]

use gaspard_format::manifest::Manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(m) = Manifest::parse(&text) {
        let again = Manifest::parse(&m.to_text()).expect("a written manifest reads back");
        assert_eq!(again, m);
    }
});
