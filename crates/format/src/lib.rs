//! gaspard's trace format: the event kinds, the raw records the recorder
//! writes in memory, and the compact chunks it writes to disk.
//!
//! A trace directory holds, for each process, a manifest
//! (`<host>-<pid>.manifest`) and one stream file per recording context
//! (`<host>-<pid>-<stream>.gst`). See `docs/FORMAT.md`.
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod chunk;
pub mod codec;
pub mod kinds;
pub mod manifest;
pub mod profile;
pub mod raw;
pub mod stream;
pub mod user;
pub mod varint;

/// Version of the on-disk format. Bump it when the encoding of chunks, the
/// kind numbers or their arguments change incompatibly.
pub const FORMAT_VERSION: u32 = 2;
