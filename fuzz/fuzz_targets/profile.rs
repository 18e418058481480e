//! The profile file of profile-only mode; what it accepts must survive being
//! written and read again unchanged.
#![no_main]

use gaspard_format::profile::ProfileFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(f) = ProfileFile::parse(&text) {
        let again = ProfileFile::parse(&f.to_text()).expect("a written profile reads back");
        assert_eq!(again, f);
    }
});
