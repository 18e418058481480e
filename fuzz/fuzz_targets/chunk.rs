//! One chunk: its 64-byte header, then its payload through the decoder
//! (without the checksum, so that the decoder itself sees damaged bytes),
//! and the decoded user-event arguments through their formats.
#![no_main]

use gaspard_format::chunk::{ChunkHeader, CHUNK_HEADER_LEN, CHUNK_MAGIC};
use gaspard_format::codec::{self, DecodedChunk};
use gaspard_format::{kinds, user};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < CHUNK_HEADER_LEN {
        let _ = ChunkHeader::parse(data);
        return;
    }
    let mut head = [0u8; CHUNK_HEADER_LEN];
    head.copy_from_slice(&data[..CHUNK_HEADER_LEN]);
    head[..4].copy_from_slice(CHUNK_MAGIC);
    let Some(h) = ChunkHeader::parse(&head) else {
        panic!("a header with the magic must parse");
    };
    let payload = &data[CHUNK_HEADER_LEN..];
    let _ = ChunkHeader::verify(&head, payload);
    let mut d = DecodedChunk::default();
    let _ = codec::decode(&h, payload, &mut d);
    for e in &d.events {
        let args = d.args_of(e);
        if e.kind == kinds::GASPARD_USER {
            let Some((&id, words)) = args.split_first() else {
                continue;
            };
            let Some(desc) = d.users.get(&id).and_then(|u| u.desc.as_deref()) else {
                continue;
            };
            if let Ok(schema) = user::parse_format(desc) {
                if let Some(values) = user::decode_values(&schema.args, words) {
                    let _ = user::format_values(&schema, &values);
                }
            }
        }
        let _ = codec::arg_layout(e.kind, e.phase, 2, e.flags);
        let _ = codec::bytes_moved(e.kind, e.phase, 2, e.flags, args);
    }
});
