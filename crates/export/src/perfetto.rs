//! Perfetto traces (`perfetto.protos.Trace`, open with ui.perfetto.dev or
//! trace_processor): a track per process and per thread, a slice per
//! START/END pair, an instant per ATOMIC event, and flows for communication:
//! from each send to the receive it matches (for a non-blocking receive, to
//! the call that completed it), and from each one-sided access
//! to an instant on the target's track ("remote put", "remote get",
//! "remote atomic") at the access's end.
//!
//! Only the messages of Perfetto's schema that are used are declared here,
//! with their field numbers from `protos/perfetto/trace/`.

use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result};
use gaspard_analyze::dump::{event_key, event_name, PerName};
use gaspard_analyze::intervals::intervals;
use prost::Message;
use rustc_hash::FxHashMap as HashMap;

use crate::{location_name, Model, OpClass, Summary};

/// `perfetto.protos.TracePacket` (the fields used).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TracePacket {
    /// Nanoseconds.
    #[prost(uint64, optional, tag = "8")]
    pub timestamp: Option<u64>,
    /// The writer's sequence.
    #[prost(uint32, optional, tag = "10")]
    pub trusted_packet_sequence_id: Option<u32>,
    /// A slice or instant.
    #[prost(message, optional, tag = "11")]
    pub track_event: Option<TrackEvent>,
    /// Interned names.
    #[prost(message, optional, tag = "12")]
    pub interned_data: Option<InternedData>,
    /// `SEQ_INCREMENTAL_STATE_CLEARED` (1), `SEQ_NEEDS_INCREMENTAL_STATE` (2).
    #[prost(uint32, optional, tag = "13")]
    pub sequence_flags: Option<u32>,
    /// A track.
    #[prost(message, optional, tag = "60")]
    pub track_descriptor: Option<TrackDescriptor>,
}

/// `perfetto.protos.TrackDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackDescriptor {
    /// Track id.
    #[prost(uint64, optional, tag = "1")]
    pub uuid: Option<u64>,
    /// Name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
    /// A process track.
    #[prost(message, optional, tag = "3")]
    pub process: Option<ProcessDescriptor>,
    /// A thread track.
    #[prost(message, optional, tag = "4")]
    pub thread: Option<ThreadDescriptor>,
    /// Enclosing track.
    #[prost(uint64, optional, tag = "5")]
    pub parent_uuid: Option<u64>,
}

/// `perfetto.protos.ProcessDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ProcessDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Name.
    #[prost(string, optional, tag = "6")]
    pub process_name: Option<String>,
}

/// `perfetto.protos.ThreadDescriptor`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ThreadDescriptor {
    /// Process id.
    #[prost(int32, optional, tag = "1")]
    pub pid: Option<i32>,
    /// Thread id.
    #[prost(int32, optional, tag = "2")]
    pub tid: Option<i32>,
    /// Name.
    #[prost(string, optional, tag = "5")]
    pub thread_name: Option<String>,
}

/// `perfetto.protos.TrackEvent`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TrackEvent {
    /// Arguments shown with the slice.
    #[prost(message, repeated, tag = "4")]
    pub debug_annotations: Vec<DebugAnnotation>,
    /// 1 slice begin, 2 slice end, 3 instant.
    #[prost(int32, optional, tag = "9")]
    pub r#type: Option<i32>,
    /// Interned name.
    #[prost(uint64, optional, tag = "10")]
    pub name_iid: Option<u64>,
    /// The track.
    #[prost(uint64, optional, tag = "11")]
    pub track_uuid: Option<u64>,
    /// Interned source location.
    #[prost(uint64, optional, tag = "34")]
    pub source_location_iid: Option<u64>,
    /// Flows leaving this slice.
    #[prost(fixed64, repeated, packed = "false", tag = "47")]
    pub flow_ids: Vec<u64>,
    /// Flows ending at this slice.
    #[prost(fixed64, repeated, packed = "false", tag = "48")]
    pub terminating_flow_ids: Vec<u64>,
}

/// `perfetto.protos.DebugAnnotation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DebugAnnotation {
    /// Unsigned value.
    #[prost(uint64, optional, tag = "3")]
    pub uint_value: Option<u64>,
    /// String value.
    #[prost(string, optional, tag = "6")]
    pub string_value: Option<String>,
    /// Name.
    #[prost(string, optional, tag = "10")]
    pub name: Option<String>,
}

/// `perfetto.protos.InternedData`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct InternedData {
    /// Event names.
    #[prost(message, repeated, tag = "2")]
    pub event_names: Vec<EventName>,
    /// Source locations.
    #[prost(message, repeated, tag = "4")]
    pub source_locations: Vec<SourceLocation>,
}

/// `perfetto.protos.SourceLocation`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SourceLocation {
    /// Id.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// File.
    #[prost(string, optional, tag = "2")]
    pub file_name: Option<String>,
    /// Line.
    #[prost(uint32, optional, tag = "4")]
    pub line_number: Option<u32>,
}

/// `perfetto.protos.EventName`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct EventName {
    /// Id.
    #[prost(uint64, optional, tag = "1")]
    pub iid: Option<u64>,
    /// Name.
    #[prost(string, optional, tag = "2")]
    pub name: Option<String>,
}

const SEQ: u32 = 1;
const SLICE_BEGIN: i32 = 1;
const SLICE_END: i32 = 2;
const INSTANT: i32 = 3;

struct Out {
    w: std::io::BufWriter<std::fs::File>,
    packets: u64,
    /// Each packet's bytes, made in the same buffer.
    buf: Vec<u8>,
}

impl Out {
    /// Appends one packet: field 1 of `Trace`, length-delimited.
    fn packet(&mut self, p: &TracePacket) -> Result<()> {
        self.buf.clear();
        self.buf.push(0x0a);
        p.encode_length_delimited(&mut self.buf)?;
        self.w.write_all(&self.buf)?;
        self.packets += 1;
        Ok(())
    }
}

fn annotation_u(name: &str, v: u64) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.into()),
        uint_value: Some(v),
        string_value: None,
    }
}

fn annotation_s(name: &str, v: String) -> DebugAnnotation {
    DebugAnnotation {
        name: Some(name.into()),
        uint_value: None,
        string_value: Some(v),
    }
}

/// Flows leaving (or ending at) slices, by stream and START event: pushed in
/// any order, then handed out event by event, each stream's in event order
/// (a map by (stream, event) was a cache miss per slice).
struct Flows {
    /// Per stream, (event, flow) in the order pushed, then sorted by event
    /// (stably: an event's flows keep their order).
    per: Vec<Vec<(usize, u64)>>,
    /// Per stream, how many of its entries were handed out or passed.
    next: Vec<usize>,
}

impl Flows {
    fn new(streams: usize) -> Flows {
        Flows {
            per: vec![Vec::new(); streams],
            next: vec![0; streams],
        }
    }

    fn push(&mut self, (stream, event): (usize, usize), flow: u64) {
        if let Some(v) = self.per.get_mut(stream) {
            v.push((event, flow));
        }
    }

    fn sort(&mut self) {
        for v in &mut self.per {
            v.sort_by_key(|&(event, _)| event);
        }
    }

    /// The flows of `event` of `stream`; asked in event order.
    fn take(&mut self, stream: usize, event: usize) -> Vec<u64> {
        let (Some(v), Some(at)) = (self.per.get(stream), self.next.get_mut(stream)) else {
            return Vec::new();
        };
        while *at < v.len() && v[*at].0 < event {
            *at += 1;
        }
        let mut out = Vec::new();
        while *at < v.len() && v[*at].0 == event {
            out.push(v[*at].1);
            *at += 1;
        }
        out
    }
}

/// Writes the Perfetto trace `out`.
pub fn write(m: &Model, out: &Path, progress: &indicatif::ProgressBar) -> Result<Summary> {
    let mut plan = Plan::default();
    plan.add_part(m);
    let mut w = Writer::create(out, plan, m.trace, &m.ranks)?;
    w.write_part(m, progress)?;
    w.finish()
}

/// A thread's track, as its descriptor needs it.
struct Track {
    process: String,
    pid: u32,
    tid: u64,
    /// Its process's rank or PE.
    rank: Option<(&'static str, usize)>,
    name: String,
}

/// What the trace's first packets and its flows need of every stream,
/// gathered before any event is written: the event names (numbered as met,
/// stream after stream), the threads' tracks, and the operations with where
/// each receive's flow ends (streams numbered in the whole trace).
#[derive(Default)]
pub(crate) struct Plan {
    names: HashMap<String, u64>,
    tracks: Vec<Track>,
    ops: Vec<crate::Op>,
    receive_at: Vec<(usize, usize)>,
}

impl Plan {
    /// Adds the streams of `m`'s trace, which follow those added before.
    pub(crate) fn add_part(&mut self, m: &Model) {
        let t = m.trace;
        let first = self.tracks.len();
        // Names by kind, user event and text (the text by where it is: the
        // same text, the same place), each made once per key.
        let mut done: rustc_hash::FxHashSet<(u16, Option<u32>, usize)> = Default::default();
        for s in &t.streams {
            for e in &s.events {
                if !done.insert(event_key(t, e)) {
                    continue;
                }
                let n = event_name(t, e);
                if !self.names.contains_key(&n) {
                    let iid = self.names.len() as u64 + 1;
                    self.names.insert(n, iid);
                }
            }
        }
        for (si, s) in t.streams.iter().enumerate() {
            self.tracks.push(Track {
                process: s.process.clone(),
                pid: s.pid,
                tid: s.tid,
                rank: m.stream_rank[si],
                name: location_name(m, si),
            });
        }
        // A non-blocking receive's flow ends at the call that completed it
        // (the data has arrived when it returns).
        let mut start_of_end: HashMap<usize, HashMap<usize, usize>> = HashMap::default();
        for op in &m.ops {
            let mut at = (op.stream, op.start_event);
            if let (Some(OpClass::Irecv), Some(c)) = (op.class, op.completion) {
                let ends = start_of_end.entry(op.stream).or_insert_with(|| {
                    intervals(&t.streams[op.stream])
                        .iter()
                        .map(|iv| (iv.end_event as usize, iv.start_event as usize))
                        .collect()
                });
                if let Some(&start) = ends.get(&c.end_event) {
                    at = (op.stream, start);
                }
            }
            self.receive_at.push((first + at.0, at.1));
            let mut op = op.clone();
            op.stream += first;
            self.ops.push(op);
        }
    }
}

/// The instant on a target's track where a one-sided access's flow ends.
fn remote_instant(time: u64, name_iid: u64, track: u64, flow: u64) -> TracePacket {
    TracePacket {
        timestamp: Some(time),
        trusted_packet_sequence_id: Some(SEQ),
        sequence_flags: Some(2),
        track_event: Some(TrackEvent {
            r#type: Some(INSTANT),
            name_iid: Some(name_iid),
            track_uuid: Some(track),
            terminating_flow_ids: vec![flow],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A Perfetto trace being written: its first packets (names, tracks) and
/// flows from a [`Plan`] of every stream, then the events of the streams
/// part after part (the whole trace, or one process after another).
pub(crate) struct Writer {
    out: std::path::PathBuf,
    o: Out,
    names: HashMap<String, u64>,
    flow_out: Flows,
    flow_in: Flows,
    /// Remote instants per target stream: (time, name, flow).
    remote: HashMap<usize, Vec<(u64, &'static str, u64)>>,
    flows: u64,
    tracks: usize,
    /// Streams of the parts written before.
    streams_before: usize,
    begins: u64,
    ends: u64,
    instants: u64,
}

/// Tracks: a process track (uuid = 1 + process index) and a thread track
/// (uuid = 1_000_000_000 + stream index) under it.
fn process_uuid(i: usize) -> u64 {
    1 + i as u64
}

fn thread_uuid(si: usize) -> u64 {
    1_000_000_000 + si as u64
}

impl Writer {
    /// Creates `out` and writes its first packets: `plan`'s names and
    /// tracks, the source locations of `t`'s callsites; `ranks`: per model,
    /// the stream of each rank's first thread.
    pub(crate) fn create(
        out: &Path,
        plan: Plan,
        t: &gaspard_analyze::trace::Trace,
        ranks: &HashMap<&'static str, Vec<Option<usize>>>,
    ) -> Result<Writer> {
        // Its directory is made as the OTF2 and Parquet exports make theirs.
        if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let file = std::fs::File::create(out)
            .with_context(|| format!("cannot create {}", out.display()))?;
        let mut o = Out {
            w: std::io::BufWriter::new(file),
            packets: 0,
            buf: Vec::new(),
        };
        let Plan {
            mut names,
            tracks,
            ops,
            receive_at,
        } = plan;
        for n in ["remote put", "remote get", "remote atomic"] {
            let next = names.len() as u64 + 1;
            names.entry(n.to_string()).or_insert(next);
        }
        let mut list: Vec<(&String, &u64)> = names.iter().collect();
        list.sort_by_key(|(_, &i)| i);
        o.packet(&TracePacket {
            trusted_packet_sequence_id: Some(SEQ),
            sequence_flags: Some(1),
            interned_data: Some(InternedData {
                event_names: list
                    .iter()
                    .map(|(n, &i)| EventName {
                        iid: Some(i),
                        name: Some((*n).clone()),
                    })
                    .collect(),
                // Callsite i (with a file) is source location i + 1.
                source_locations: t
                    .callsites
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| {
                        Some(SourceLocation {
                            iid: Some(i as u64 + 1),
                            file_name: Some(c.file.clone()?),
                            line_number: Some(c.line),
                        })
                    })
                    .collect(),
            }),
            ..Default::default()
        })?;

        let process_index: HashMap<&str, usize> = t
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| (p.name.as_str(), i))
            .collect();
        let mut seen = vec![false; t.processes.len()];
        for (si, s) in tracks.iter().enumerate() {
            let pi = process_index.get(s.process.as_str()).copied();
            if let Some(pi) = pi {
                if !std::mem::replace(&mut seen[pi], true) {
                    let name = crate::process_name(&s.process, s.rank);
                    o.packet(&TracePacket {
                        track_descriptor: Some(TrackDescriptor {
                            uuid: Some(process_uuid(pi)),
                            process: Some(ProcessDescriptor {
                                pid: Some(s.pid as i32),
                                process_name: Some(name),
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })?;
                }
            }
            o.packet(&TracePacket {
                track_descriptor: Some(TrackDescriptor {
                    uuid: Some(thread_uuid(si)),
                    parent_uuid: pi.map(process_uuid),
                    thread: Some(ThreadDescriptor {
                        pid: Some(s.pid as i32),
                        tid: Some(s.tid as i32),
                        thread_name: Some(s.name.clone()),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            })?;
        }

        // Flows: each matched message (send -> receive) and each one-sided
        // access (access -> instant on the target), numbered from 1.
        // Flows leaving and ending at slices, by (stream, START event).
        let mut flow_out = Flows::new(tracks.len());
        let mut flow_in = Flows::new(tracks.len());
        let mut next_flow = 1u64;
        for (s, r) in crate::messages_of(&ops) {
            let op = &ops[s];
            flow_out.push((op.stream, op.start_event), next_flow);
            flow_in.push(receive_at[r], next_flow);
            next_flow += 1;
        }
        let mut remote: HashMap<usize, Vec<(u64, &'static str, u64)>> = HashMap::default();
        for op in &ops {
            let Some(class) = op.class.filter(|c| c.is_rma()) else {
                continue;
            };
            let Some(target) = op
                .peer
                .and_then(|p| ranks.get(op.model)?.get(p).copied().flatten())
            else {
                continue;
            };
            let name = match class {
                OpClass::Put => "remote put",
                OpClass::Get => "remote get",
                _ => "remote atomic",
            };
            flow_out.push((op.stream, op.start_event), next_flow);
            remote
                .entry(target)
                .or_default()
                .push((op.t_end, name, next_flow));
            next_flow += 1;
        }
        flow_out.sort();
        flow_in.sort();
        Ok(Writer {
            out: out.to_path_buf(),
            o,
            names,
            flow_out,
            flow_in,
            remote,
            flows: next_flow - 1,
            tracks: tracks.len() + seen.iter().filter(|&&b| b).count(),
            streams_before: 0,
            begins: 0,
            ends: 0,
            instants: 0,
        })
    }

    /// Writes the events of the streams of `m`'s trace, which follow those
    /// written before.
    pub(crate) fn write_part(
        &mut self,
        m: &Model,
        progress: &indicatif::ProgressBar,
    ) -> Result<()> {
        let t = m.trace;
        let first = self.streams_before;
        // Each event's name's number, found once per name rather than names
        // hashed for every event.
        let mut iid_of = PerName::default();
        let o = &mut self.o;
        for (si, s) in t.streams.iter().enumerate() {
            let g = first + si;
            let track = thread_uuid(g);
            // Per event (by index): whether it starts or ends an interval
            // (tables: a map per event was most of the export's time).
            let mut starts = vec![false; s.events.len()];
            let mut closes = vec![false; s.events.len()];
            for iv in intervals(s) {
                starts[iv.start_event as usize] = true;
                closes[iv.end_event as usize] = true;
            }
            // Events and remote instants of this track, merged in time order.
            let mut remote_here = self.remote.remove(&g).unwrap_or_default();
            remote_here.sort_by_key(|r| r.0);
            let mut rq = remote_here.into_iter().peekable();
            let mut last = 0u64;
            for (i, e) in s.events.iter().enumerate() {
                while let Some(&(rt, name, flow)) = rq.peek() {
                    if rt > e.t_ns {
                        break;
                    }
                    rq.next();
                    o.packet(&remote_instant(rt.max(last), self.names[name], track, flow))?;
                    self.instants += 1;
                    last = rt.max(last);
                }
                let ty = match e.phase {
                    0 if starts[i] => SLICE_BEGIN,
                    1 if closes[i] => SLICE_END,
                    2 => INSTANT,
                    _ => continue,
                };
                let time = e.t_ns.max(last);
                last = time;
                let mut ev = TrackEvent {
                    r#type: Some(ty),
                    track_uuid: Some(track),
                    ..Default::default()
                };
                if ty != SLICE_END {
                    let names = &self.names;
                    let iid = *iid_of.get(t, e, || names[&event_name(t, e)]);
                    ev.name_iid = Some(iid);
                    if t.callsites
                        .get(e.callsite as usize)
                        .is_some_and(|c| c.file.is_some())
                    {
                        ev.source_location_iid = Some(e.callsite as u64 + 1);
                    }
                }
                if ty == SLICE_BEGIN {
                    if let Some(&oi) = m.op_at[si].get(&i) {
                        let op = &m.ops[oi];
                        if let Some(p) = op.peer {
                            ev.debug_annotations.push(annotation_u("peer", p as u64));
                        }
                        ev.debug_annotations.push(annotation_u("bytes", op.bytes));
                        if let Some(w) = op.window {
                            ev.debug_annotations
                                .push(annotation_s("object", m.windows[w].name.clone()));
                        }
                        if let Some(off) = op.offset {
                            ev.debug_annotations.push(annotation_u("offset", off));
                        }
                    }
                    ev.flow_ids = self.flow_out.take(g, i);
                    ev.terminating_flow_ids = self.flow_in.take(g, i);
                }
                match ty {
                    SLICE_BEGIN => self.begins += 1,
                    SLICE_END => self.ends += 1,
                    _ => self.instants += 1,
                }
                o.packet(&TracePacket {
                    timestamp: Some(time),
                    trusted_packet_sequence_id: Some(SEQ),
                    sequence_flags: Some(2),
                    track_event: Some(ev),
                    ..Default::default()
                })?;
            }
            for (rt, name, flow) in rq {
                o.packet(&remote_instant(rt.max(last), self.names[name], track, flow))?;
                self.instants += 1;
            }
            progress.inc(s.events.len() as u64);
        }
        self.streams_before += t.streams.len();
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<Summary> {
        let out = self.out;
        self.o
            .w
            .flush()
            .with_context(|| format!("cannot write {}", out.display()))?;
        Ok(Summary {
            lines: vec![format!(
                "{}: {} packets, {} tracks, {} slices, {} slice ends, {} instants, {} flows",
                out.display(),
                self.o.packets,
                self.tracks,
                self.begins,
                self.ends,
                self.instants,
                self.flows
            )],
        })
    }
}
