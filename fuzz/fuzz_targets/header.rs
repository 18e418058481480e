//! The versioned stream-file header; what it accepts must be written back
//! to the same fields.
#![no_main]

use gaspard_format::chunk::{file_header, parse_file_header};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = parse_file_header(data) {
        assert!(h.len <= data.len());
        let fields: Vec<(&str, String)> = h
            .fields
            .iter()
            .filter(|(k, _)| !k.contains('\n') && !k.contains('\r'))
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        let b = file_header(&fields);
        let again = parse_file_header(&b).expect("a written header reads back");
        assert_eq!(again.len, b.len());
    }
});
