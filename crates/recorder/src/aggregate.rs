//! Profile-only mode (`GASPARD_PROFILE_ONLY=1`): the measured threads record
//! as always, and the flusher folds each full buffer into counts, times and
//! bytes per (stream, event name, callsite) instead of writing it; the
//! process writes `<host>-<pid>.profile` (crates/format/src/profile.rs) and
//! its manifest, no stream files. Memory is bounded by the distinct
//! (name, callsite) pairs and the START/END pairs still open.

use rustc_hash::FxHashMap as HashMap;

use gaspard_format::chunk::ChunkHeader;
use gaspard_format::codec::{self, DecodedChunk};
use gaspard_format::kinds;
use gaspard_format::profile::{ProfileFile, ProfileRow, ProfileStream};

use crate::clock;
use crate::process::Process;

#[derive(Default)]
struct StreamAgg {
    rows: Vec<ProfileRow>,
    /// Rows by (name, file, line, return address of events without a file).
    index: HashMap<(String, Option<String>, u32, u64), usize>,
    /// Open STARTs per (kind, user event): (time in ticks, row).
    open: HashMap<(u16, u64), Vec<(u64, usize)>>,
    /// Per row, its pairs open (a recursive function's calls within one
    /// another: only the outermost counts in its total).
    depth: Vec<u32>,
    events: u64,
    first: Option<u64>,
    last: u64,
}

/// The profiles of a process's streams.
#[derive(Default)]
pub(crate) struct Aggregates {
    streams: HashMap<u32, StreamAgg>,
    /// Problems met while folding (a chunk that does not decode).
    pub(crate) problems: Vec<String>,
}

fn is_tool_kind(k: u16) -> bool {
    matches!(
        k,
        kinds::GASPARD_INIT
            | kinds::GASPARD_MEASUREMENT
            | kinds::GASPARD_LOST
            | kinds::GASPARD_CLOCK_SYNC
    )
}

impl Aggregates {
    /// Folds one buffer of stream `stream` into its profile.
    pub(crate) fn fold(&mut self, p: &Process, stream: u32, header: &ChunkHeader, payload: &[u8]) {
        let mut c = DecodedChunk::default();
        if let Err(e) = codec::decode(header, payload, &mut c) {
            self.problems.push(format!(
                "stream {stream}: a buffer could not be read to its end (byte {}: {}); the events after it are not in the profile",
                e.offset, e.what
            ));
        }
        let users = p.users.lock().unwrap_or_else(|e| e.into_inner());
        let pts_words = (p.pts_bytes as usize).div_ceil(8);
        let s = self.streams.entry(stream).or_default();
        // Rows by (kind, user or function string, callsite, return address)
        // within this chunk.
        let mut local: HashMap<(u16, u64, u32, u64), usize> = HashMap::default();
        // Where an event's return address is among its words, by (kind, phase, flags).
        let mut code_at: HashMap<(u16, u8, u8), Option<usize>> = HashMap::default();
        for e in &c.events {
            s.events += 1;
            s.first.get_or_insert(e.ts);
            s.last = s.last.max(e.ts);
            if is_tool_kind(e.kind) {
                continue;
            }
            let args = c.args_of(e);
            let user = if e.kind == kinds::GASPARD_USER {
                args.first().copied().unwrap_or(0)
            } else {
                0
            };
            let func = if e.kind == kinds::C_FUNC {
                args.first().copied().unwrap_or(0)
            } else {
                0
            };
            let open_key = (e.kind, user);
            if !matches!(e.phase, 0 | 2) {
                if let Some((start, at)) = s.open.get_mut(&open_key).and_then(|v| v.pop()) {
                    let d = ticks_to_ns(e.ts.saturating_sub(start));
                    let depth = &mut s.depth[at];
                    *depth = depth.saturating_sub(1);
                    let outermost = *depth == 0;
                    let r = &mut s.rows[at];
                    if r.intervals == 0 || d < r.min_ns {
                        r.min_ns = d;
                    }
                    r.max_ns = r.max_ns.max(d);
                    if outermost {
                        r.total_ns += d;
                    }
                    r.sum_ns += d;
                    r.intervals += 1;
                }
                continue;
            }
            let site = c.callsites.get(&e.callsite).copied().unwrap_or_default();
            // Events without a source position of their own are told apart
            // by their return address, for the reader to place.
            let code = if site.file == 0 && e.kind != kinds::GASPARD_USER {
                code_at
                    .entry((e.kind, e.phase, e.flags))
                    .or_insert_with(|| codec::codeptr_word(e.kind, e.phase, pts_words, e.flags))
                    .and_then(|i| args.get(i).copied())
                    .unwrap_or(0)
            } else {
                0
            };
            let row = *local
                .entry((e.kind, user | func, e.callsite, code))
                .or_insert_with(|| {
                    let name = if e.kind == kinds::GASPARD_USER {
                        users
                            .iter()
                            .find(|u| u64::from(u.id) == user)
                            .map_or_else(|| format!("user_event_{user}"), |u| u.name.clone())
                    } else if e.kind == kinds::C_FUNC {
                        format!("GASP_C_FUNC {}", c.string(func as u32).unwrap_or("?"))
                    } else {
                        kinds::kind(e.kind)
                            .map_or_else(|| format!("kind_{}", e.kind), |k| k.name.to_string())
                    };
                    let file = (site.file != 0)
                        .then(|| c.string(site.file).map(str::to_string))
                        .flatten();
                    let key = (name, file, site.line, code);
                    let n = s.rows.len();
                    let i = *s.index.entry(key.clone()).or_insert(n);
                    if i == n {
                        s.rows.push(ProfileRow {
                            stream,
                            name: key.0,
                            file: key.1,
                            line: key.2,
                            code: key.3,
                            ..Default::default()
                        });
                    }
                    i
                });
            let r = &mut s.rows[row];
            r.count += 1;
            if e.kind != kinds::GASPARD_USER {
                r.bytes += codec::bytes_moved(e.kind, e.phase, pts_words, e.flags, args);
            }
            if e.phase == 0 {
                s.open.entry(open_key).or_default().push((e.ts, row));
                if s.depth.len() <= row {
                    s.depth.resize(row + 1, 0);
                }
                s.depth[row] += 1;
            }
        }
    }

    /// The profile file, as it stands.
    pub(crate) fn file(&self, p: &Process) -> ProfileFile {
        let entries = p.streams.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut f = ProfileFile::default();
        let mut ids: Vec<u32> = self.streams.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let s = &self.streams[&id];
            let entry = entries.iter().find(|e| e.id == id);
            f.streams.push(ProfileStream {
                id,
                tid: entry.map_or(0, |e| e.tid),
                thread: entry.map_or(0, |e| e.thread),
                model: entry.map_or(0, |e| e.model),
                events: s.events,
                span_ns: ticks_to_ns(s.last.saturating_sub(s.first.unwrap_or(s.last))),
            });
            f.rows.extend(s.rows.iter().cloned());
        }
        f
    }
}

fn ticks_to_ns(t: u64) -> u64 {
    (t as f64 * 1000.0 / clock::ticks_per_us()) as u64
}
