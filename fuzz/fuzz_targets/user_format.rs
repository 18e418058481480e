//! The printf-style formats of user events and the formatting of their
//! values: the first bytes up to a NUL are the format, the rest the argument
//! words.
#![no_main]

use gaspard_format::user;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (fmt, rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let fmt = String::from_utf8_lossy(fmt);
    let Ok(schema) = user::parse_format(&fmt) else {
        return;
    };
    let words: Vec<u64> = rest
        .chunks(8)
        .map(|c| {
            let mut b = [0u8; 8];
            b[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(b)
        })
        .collect();
    if let Some(values) = user::decode_values(&schema.args, &words) {
        let s = user::format_values(&schema, &values);
        assert!(
            s.len() <= fmt.len() + user::MAX_FORMATTED,
            "{} bytes from a {}-byte format",
            s.len(),
            fmt.len()
        );
        for v in &values {
            let _ = v.to_plain();
        }
    }
});
