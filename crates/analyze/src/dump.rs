//! Every event, decoded, as text or JSON.

use std::fmt::Write as _;

use gaspard_format::codec::arg_layout;
use gaspard_format::kinds::{self, ArgType};
use gaspard_format::raw::{FLAG_ARGS_UNREAD, FLAG_PTS_RESOLVED};
use gaspard_format::user;
use serde_json::{json, Map, Value};

use crate::distributed::ByProcess;
use crate::trace::{Event, Stream, Trace};

/// `START`, `END` or `ATOMIC`.
pub fn phase_name(p: u8) -> &'static str {
    match p {
        0 => "START",
        1 => "END",
        _ => "ATOMIC",
    }
}

/// The name an event is reported under: its kind, its user event's name, or
/// for a function `GASP_C_FUNC <signature>`.
pub fn event_name(t: &Trace, e: &Event) -> String {
    match e.user() {
        Some(u) => t.user_events[u as usize].name.clone(),
        None if e.kind == kinds::C_FUNC && t.text(e).is_some() => {
            format!("GASP_C_FUNC {}", t.text(e).unwrap_or_default())
        }
        None => {
            kinds::kind(e.kind).map_or_else(|| format!("kind_{}", e.kind), |k| k.name.to_string())
        }
    }
}

fn hex(v: u64) -> String {
    format!("{v:#x}")
}

fn pts_value(words: &[u64], resolved: bool, bytes: u32) -> Value {
    if resolved {
        let thread = words.first().copied().unwrap_or(u64::MAX);
        if thread == u64::MAX {
            return json!({"unresolved": true});
        }
        return json!({"thread": thread, "addr": hex(words.get(1).copied().unwrap_or(0))});
    }
    let mut s = String::new();
    for w in words {
        for b in w.to_le_bytes() {
            let _ = write!(s, "{b:02x}");
        }
    }
    s.truncate(bytes as usize * 2);
    json!({ "bytes": s })
}

/// Decoded named arguments of a system event.
pub fn args_json(t: &Trace, s: &Stream, e: &Event) -> Map<String, Value> {
    match serde_json::to_value(ArgsJson { t, s, e }) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

/// Values of a user event and their printf rendering.
pub fn user_values(t: &Trace, s: &Stream, e: &Event) -> Option<(Vec<user::Value>, String)> {
    UserTexts::default().values(t, s, e)
}

/// One event as JSON.
pub fn event_json(t: &Trace, s: &Stream, e: &Event) -> Value {
    let user = e.user().is_some().then(|| user_values(t, s, e));
    serde_json::to_value(EventJson { t, s, e, user }).unwrap_or_default()
}

/// The shared objects an event's addresses fall in: for OpenSHMEM, each
/// address argument inside a symmetric allocation; for MPI one-sided
/// operations, the target's window and byte offset.
pub fn objects_json(t: &Trace, s: &Stream, e: &Event) -> Map<String, Value> {
    let mut m = Map::new();
    let Some(k) = kinds::kind(e.kind) else {
        return m;
    };
    if k.name.starts_with("GASP_SHMEM_") {
        for (name, v) in crate::objects::args_by_name(s, e) {
            if name == "codeptr" || v == 0 {
                continue;
            }
            if let Some((obj, off)) = t.objects.find(&s.process, v, e.t_ns) {
                m.insert(name.to_string(), json!({"object": obj, "offset": off}));
            }
        }
    } else if k.name.starts_with("GASP_MPI_") {
        let a = crate::objects::args_by_name(s, e);
        if let (Some(&win), Some(&disp)) = (a.get("win"), a.get("disp")) {
            if let Some(w) = t.objects.window(&s.process, win) {
                m.insert(
                    "target".into(),
                    json!({"object": w.name, "offset": disp.saturating_mul(w.disp_unit)}),
                );
            }
        }
    }
    m
}

/// Processes as JSON.
pub fn processes_json(t: &Trace) -> Value {
    Value::Array(
        t.processes
            .iter()
            .map(|p| match &p.manifest {
                Some(m) => json!({
                    "name": p.name, "host": m.host, "pid": m.pid, "status": m.status,
                    "command": m.command, "events": m.events, "lost": m.lost,
                    "unknown_tags": m.unknown_tags, "clock": m.clock, "notes": m.notes,
                }),
                None => json!({"name": p.name, "status": "unknown (no manifest)"}),
            })
            .collect(),
    )
}

/// The whole dump as JSON, as a value (the document [`write_json`] writes).
pub fn to_json(t: &Trace) -> Value {
    serde_json::to_value(Whole(t)).unwrap_or_default()
}

/// The whole dump as JSON, written as it is made:
/// one event's value at a time. A trace's values all at once take tens of
/// times its events' memory (6.3 GB for 600,000 events with their shared
/// objects).
pub fn write_json(t: &Trace, out: &mut dyn std::io::Write) -> serde_json::Result<()> {
    serde_json::to_writer(out, &Whole(t))
}

/// [`write_json`]'s document.
struct Whole<'a>(&'a Trace);

impl serde::Serialize for Whole<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let t = self.0;
        let mut m = ser.serialize_map(Some(8))?;
        m.serialize_entry("trace", &t.dir.display().to_string())?;
        m.serialize_entry("threads", &Threads(t))?;
        m.serialize_entry("events", &t.events())?;
        m.serialize_entry("lost_events", &t.lost_events())?;
        m.serialize_entry("unknown_tags", &t.unknown_tags())?;
        m.serialize_entry("problems", &t.problems)?;
        m.serialize_entry("processes", &processes_json(t))?;
        m.serialize_entry(
            "clock_sync",
            &t.clock_sync
                .iter()
                .map(crate::clocksync::to_json)
                .collect::<Vec<_>>(),
        )?;
        m.end()
    }
}

/// The threads of [`Whole`], each with its events.
struct Threads<'a>(&'a Trace);

impl serde::Serialize for Threads<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let t = self.0;
        let mut seq = ser.serialize_seq(Some(t.streams.len()))?;
        for s in &t.streams {
            seq.serialize_element(&Thread(t, s))?;
        }
        seq.end()
    }
}

/// One thread of a dump, with its events.
struct Thread<'a>(&'a Trace, &'a Stream);

impl serde::Serialize for Thread<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (t, s) = (self.0, self.1);
        let mut m = ser.serialize_map(Some(8))?;
        m.serialize_entry("process", &s.process)?;
        m.serialize_entry("pid", &s.pid)?;
        m.serialize_entry("stream", &s.stream)?;
        m.serialize_entry("tid", &s.tid)?;
        m.serialize_entry("thread", &s.thread)?;
        m.serialize_entry("model", kinds::model_name(u64::from(s.model)))?;
        m.serialize_entry("damaged", &s.damaged)?;
        m.serialize_entry("events", &Events(t, s))?;
        m.end()
    }
}

/// A thread's events, one value at a time.
struct Events<'a>(&'a Trace, &'a Stream);

impl serde::Serialize for Events<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let (t, s) = (self.0, self.1);
        let mut seq = ser.serialize_seq(Some(s.events.len()))?;
        let mut users = UserTexts::default();
        for e in &s.events {
            let user = e.user().is_some().then(|| users.values(t, s, e));
            seq.serialize_element(&EventJson { t, s, e, user })?;
        }
        seq.end()
    }
}

/// An event as JSON, written as it is made ([`event_json`] makes its value
/// of it; a dump writes millions without). `user`: a user event's values
/// and text ([`user_values`]).
struct EventJson<'a> {
    t: &'a Trace,
    s: &'a Stream,
    e: &'a Event,
    user: Option<Option<(Vec<user::Value>, String)>>,
}

impl serde::Serialize for EventJson<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (t, s, e) = (self.t, self.s, self.e);
        let site = &t.callsites[e.callsite as usize];
        let mut m = ser.serialize_map(None)?;
        m.serialize_entry("t_ns", &e.t_ns)?;
        match kinds::kind(e.kind) {
            Some(k) => m.serialize_entry("kind", k.name)?,
            None => m.serialize_entry("kind", &format!("kind_{}", e.kind))?,
        }
        m.serialize_entry("phase", phase_name(e.phase))?;
        m.serialize_entry("file", &site.file)?;
        m.serialize_entry("line", &site.line)?;
        m.serialize_entry("col", &site.col)?;
        match (e.user(), &self.user) {
            (Some(u), Some(values)) => {
                m.serialize_entry("name", &t.user_events[u as usize].name)?;
                match values {
                    Some((vals, text)) => {
                        m.serialize_entry("values", &UserValuesJson(vals))?;
                        m.serialize_entry("text", text)?;
                    }
                    None => m.serialize_entry("args_unread", &true)?,
                }
            }
            _ => {
                m.serialize_entry("args", &ArgsJson { t, s, e })?;
                // Only the OpenSHMEM and MPI kinds have objects.
                if kinds::kind(e.kind).is_some_and(|k| {
                    k.name.starts_with("GASP_SHMEM_") || k.name.starts_with("GASP_MPI_")
                }) {
                    let objects = objects_json(t, s, e);
                    if !objects.is_empty() {
                        m.serialize_entry("objects", &objects)?;
                    }
                }
            }
        }
        m.end()
    }
}

/// A user event's values in JSON.
struct UserValuesJson<'a>(&'a [user::Value]);

impl serde::Serialize for UserValuesJson<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = ser.serialize_seq(Some(self.0.len()))?;
        for v in self.0 {
            match v {
                user::Value::Int(i) => seq.serialize_element(i)?,
                // (Not a finite number: null, as in the JSON value.)
                user::Value::Float(f) => seq.serialize_element(f)?,
                user::Value::Str(x) => seq.serialize_element(x)?,
                user::Value::Ptr(p) => seq.serialize_element(&format_args!("{p:#x}"))?,
            }
        }
        seq.end()
    }
}

/// A system event's named arguments in JSON, written as they are made
/// ([`args_json`] makes their map of them).
struct ArgsJson<'a> {
    t: &'a Trace,
    s: &'a Stream,
    e: &'a Event,
}

impl serde::Serialize for ArgsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let (t, s, e) = (self.t, self.s, self.e);
        let layout = arg_layout(e.kind, e.phase, (s.pts_bytes as usize).div_ceil(8), e.flags);
        let words = s.args(e);
        let mut text = t.text(e).into_iter();
        let mut m = ser.serialize_map(None)?;
        let mut i = 0;
        for (name, ty, n) in layout {
            let Some(w) = words.get(i..i + n) else {
                break;
            };
            i += n;
            let first = w.first().copied().unwrap_or(0);
            match ty {
                ArgType::Int => m.serialize_entry(name, &(first as i64))?,
                ArgType::Size | ArgType::Ticks => m.serialize_entry(name, &first)?,
                ArgType::Ptr | ArgType::Handle => {
                    m.serialize_entry(name, &format_args!("{first:#x}"))?
                }
                ArgType::Pts | ArgType::Lock => m.serialize_entry(
                    name,
                    &pts_value(w, e.flags & FLAG_PTS_RESOLVED != 0, s.pts_bytes),
                )?,
                ArgType::Str => m.serialize_entry(name, text.next().unwrap_or_default())?,
                ArgType::Reduction => m.serialize_entry(name, kinds::reduction_name(first))?,
                ArgType::Model => m.serialize_entry(name, kinds::model_name(first))?,
            }
        }
        m.end()
    }
}

/// What [`write_json_by_process`] learns as it reads the processes, for the
/// entries after the threads.
#[derive(Default)]
struct Totals {
    events: u64,
    lost_in_streams: u64,
    problems: Vec<String>,
}

/// The threads of a trace read one process at a time.
struct ThreadsByProcess<'a>(&'a ByProcess, &'a std::cell::RefCell<Totals>);

impl serde::Serialize for ThreadsByProcess<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = ser.serialize_seq(None)?;
        for i in 0..self.0.processes() {
            let t = self.0.read(i);
            for s in &t.streams {
                seq.serialize_element(&Thread(&t, s))?;
            }
            let mut totals = self.1.borrow_mut();
            totals.events += stream_events(&t);
            totals.lost_in_streams += t.lost_events().saturating_sub(t.lost_by_manifests());
            totals.problems.extend(t.problems);
        }
        seq.end()
    }
}

fn stream_events(t: &Trace) -> u64 {
    t.streams.iter().map(|s| s.events.len() as u64).sum()
}

/// [`write_json`] with one process's events in memory at a time
/// ([`ByProcess`]): the same threads and entries (the problems found in the
/// events, late stamps and records that stop, after those found first).
pub fn write_json_by_process(
    r: &ByProcess,
    out: &mut dyn std::io::Write,
) -> serde_json::Result<()> {
    use serde::ser::{SerializeMap, Serializer};
    let t = r.tables();
    r.plan(1);
    let totals = std::cell::RefCell::new(Totals::default());
    let mut ser = serde_json::Serializer::new(out);
    let mut m = ser.serialize_map(Some(8))?;
    m.serialize_entry("trace", &t.dir.display().to_string())?;
    m.serialize_entry("threads", &ThreadsByProcess(r, &totals))?;
    let totals = totals.into_inner();
    m.serialize_entry("events", &(totals.events + t.profiled_events()))?;
    m.serialize_entry(
        "lost_events",
        &t.lost_by_manifests().saturating_add(totals.lost_in_streams),
    )?;
    m.serialize_entry("unknown_tags", &t.unknown_tags())?;
    let problems: Vec<&String> = t.problems.iter().chain(&totals.problems).collect();
    m.serialize_entry("problems", &problems)?;
    m.serialize_entry("processes", &processes_json(t))?;
    m.serialize_entry(
        "clock_sync",
        &t.clock_sync
            .iter()
            .map(crate::clocksync::to_json)
            .collect::<Vec<_>>(),
    )?;
    let done = SerializeMap::end(m);
    r.finish();
    done
}

/// A JSON value as the text dump writes it (what [`args_text`] writes
/// without making the JSON).
#[cfg(test)]
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| format!("{k}:{}", plain(v)))
            .collect::<Vec<_>>()
            .join(","),
        other => other.to_string(),
    }
}

/// The whole dump as text: one block per thread, one line per event.
pub fn to_text(t: &Trace, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "trace {}: {} in {}",
        t.dir.display(),
        crate::count(t.events(), "event", "events"),
        crate::count(t.streams.len() as u64, "thread", "threads")
    )?;
    notes_and_clocks(t, out)?;
    for s in &t.streams {
        stream_text(t, s, out)?;
    }
    Ok(())
}

/// [`to_text`] with one process's events in memory at a time
/// ([`ByProcess`]): the same blocks of threads; how many events and threads
/// there are, and the problems found in the events (late stamps, records
/// that stop), come after them.
pub fn to_text_by_process(r: &ByProcess, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let t = r.tables();
    r.plan(1);
    writeln!(out, "trace {}: read one process at a time", t.dir.display())?;
    notes_and_clocks(t, out)?;
    let (mut events, mut threads, mut later) = (t.profiled_events(), 0, Vec::new());
    for i in 0..r.processes() {
        let p = r.read(i);
        for s in &p.streams {
            stream_text(&p, s, out)?;
        }
        events += stream_events(&p);
        threads += p.streams.len();
        later.extend(p.problems);
    }
    r.finish();
    writeln!(
        out,
        "\ntrace {}: {events} events in {threads} threads",
        t.dir.display()
    )?;
    for p in &later {
        writeln!(out, "note: {p}")?;
    }
    Ok(())
}

/// The text dump's `note:` line per problem of `t` and `clock:` line per
/// clock correction.
fn notes_and_clocks(t: &Trace, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    for p in &t.problems {
        writeln!(out, "note: {p}")?;
    }
    for c in &t.clock_sync {
        writeln!(out, "clock: {}", crate::clocksync::describe(c))?;
    }
    Ok(())
}

/// [`args_json`] of `e` as the text dump shows it, appended to `line`:
/// `name=value` each, apart by a space, a pointer-to-shared as
/// `thread:T,addr:0x..` (what [`plain`] makes of the JSON), without making
/// the JSON (a dump writes millions of lines).
fn args_text(line: &mut String, t: &Trace, s: &Stream, e: &Event) {
    let layout = arg_layout(e.kind, e.phase, (s.pts_bytes as usize).div_ceil(8), e.flags);
    let words = s.args(e);
    let mut text = t.text(e).into_iter();
    let mut i = 0;
    for (k, (name, ty, n)) in layout.into_iter().enumerate() {
        let Some(w) = words.get(i..i + n) else {
            break;
        };
        i += n;
        if k > 0 {
            line.push(' ');
        }
        line.push_str(name);
        line.push('=');
        let first = w.first().copied().unwrap_or(0);
        let _ = match ty {
            ArgType::Int => write!(line, "{}", first as i64),
            ArgType::Size | ArgType::Ticks => write!(line, "{first}"),
            ArgType::Ptr | ArgType::Handle => write!(line, "{first:#x}"),
            ArgType::Pts | ArgType::Lock => {
                pts_text(line, w, e.flags & FLAG_PTS_RESOLVED != 0, s.pts_bytes);
                Ok(())
            }
            ArgType::Str => {
                line.push_str(text.next().unwrap_or_default());
                Ok(())
            }
            ArgType::Reduction => {
                line.push_str(kinds::reduction_name(first));
                Ok(())
            }
            ArgType::Model => {
                line.push_str(kinds::model_name(first));
                Ok(())
            }
        };
    }
}

/// [`pts_value`] as [`plain`] writes it.
fn pts_text(line: &mut String, words: &[u64], resolved: bool, bytes: u32) {
    if resolved {
        let thread = words.first().copied().unwrap_or(u64::MAX);
        if thread == u64::MAX {
            line.push_str("unresolved:true");
        } else {
            let addr = words.get(1).copied().unwrap_or(0);
            let _ = write!(line, "thread:{thread},addr:{addr:#x}");
        }
        return;
    }
    line.push_str("bytes:");
    let start = line.len();
    for w in words {
        for b in w.to_le_bytes() {
            let _ = write!(line, "{b:02x}");
        }
    }
    line.truncate(start + (bytes as usize * 2).min(line.len() - start));
}

/// The values of each user event's format (parsed once per user event,
/// not once per event): [`user_values`]' text.
#[derive(Default)]
struct UserTexts(Vec<Option<Option<user::Schema>>>);

impl UserTexts {
    /// [`user_values`] of user event `e`.
    fn values(&mut self, t: &Trace, s: &Stream, e: &Event) -> Option<(Vec<user::Value>, String)> {
        let u = e.user()? as usize;
        let def = &t.user_events[u];
        if e.flags & FLAG_ARGS_UNREAD != 0 || def.unreadable.is_some() {
            return None;
        }
        let Some(desc) = &def.desc else {
            return Some((Vec::new(), String::new()));
        };
        if u >= self.0.len() {
            self.0.resize_with(u + 1, || None);
        }
        let schema = self.0[u]
            .get_or_insert_with(|| user::parse_format(desc).ok())
            .as_ref()?;
        let vals = user::decode_values(&schema.args, s.args(e).get(1..).unwrap_or(&[]))?;
        let text = user::format_values(schema, &vals);
        Some((vals, text))
    }

    /// [`user_values`]' text of user event `e`, or `None` where it has none.
    fn text(&mut self, t: &Trace, s: &Stream, e: &Event) -> Option<String> {
        self.values(t, s, e).map(|(_, text)| text)
    }
}

/// Appends `s`, then spaces up to `width` characters, as `{:<width}` does.
fn pad(line: &mut String, s: &str, width: usize) {
    line.push_str(s);
    let n = s.chars().count();
    if n < width {
        line.extend(std::iter::repeat_n(' ', width - n));
    }
}

/// Appends `ns` in us with three decimals, right-aligned in 14 characters,
/// as `{:>14.3}` does for `ns as f64 / 1000.0`: from the integer where that
/// quotient is within a quarter of a thousandth of it (below 2^50 ns, 13
/// days: it then rounds to the same three decimals), else from the f64.
fn micros(line: &mut String, ns: u64) {
    if ns < 1 << 50 {
        let start = line.len();
        let _ = write!(line, "{}.{:03}", ns / 1000, ns % 1000);
        let n = line.len() - start;
        if n < 14 {
            line.insert_str(start, &"              "[..14 - n]);
        }
    } else {
        let _ = write!(line, "{:>14.3}", ns as f64 / 1000.0);
    }
}

/// An event's name's key: its kind, user event and text (the text by where
/// it is: the same text, the same place).
pub fn event_key(t: &Trace, e: &Event) -> (u16, Option<u32>, usize) {
    (
        e.kind,
        e.user(),
        t.text(e).map_or(0, |x| x.as_ptr() as usize),
    )
}

/// What a writer of events makes once per event name ([`event_key`]) rather than for
/// every event: by kind alone from a table for the events that only their
/// kind names (most), from a map for the others.
#[derive(Debug)]
pub struct PerName<V> {
    by_kind: Vec<Option<V>>,
    other: rustc_hash::FxHashMap<(u16, Option<u32>, usize), V>,
}

impl<V> Default for PerName<V> {
    fn default() -> Self {
        PerName {
            by_kind: std::iter::repeat_with(|| None)
                .take(PerName::<V>::KINDS)
                .collect(),
            other: Default::default(),
        }
    }
}

impl<V> PerName<V> {
    /// Kinds looked up in the table.
    const KINDS: usize = 2048;

    /// What was made for `e`'s name (one of `t`'s events), made by `make`
    /// when first asked.
    pub fn get(&mut self, t: &Trace, e: &Event, make: impl FnOnce() -> V) -> &V {
        match self.by_kind.get_mut(e.kind as usize) {
            Some(v) if e.user().is_none() && t.text(e).is_none() => v.get_or_insert_with(make),
            _ => self.other.entry(event_key(t, e)).or_insert_with(make),
        }
    }
}

/// One thread's block of the text dump.
fn stream_text(t: &Trace, s: &Stream, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "\n== {} stream {} (thread {}, tid {}, model {}){}",
        s.process,
        s.stream,
        s.thread,
        s.tid,
        kinds::model_name(u64::from(s.model)),
        if s.damaged { " [damaged]" } else { "" }
    )?;
    // Each line made in the same buffers, written at once.
    let (mut line, mut loc, mut detail) = (String::new(), String::new(), String::new());
    let mut users = UserTexts::default();
    let mut names = PerName::default();
    for e in &s.events {
        let site = &t.callsites[e.callsite as usize];
        loc.clear();
        let _ = match &site.file {
            Some(f) if site.col > 0 => write!(loc, "{f}:{}:{}", site.line, site.col),
            Some(f) => write!(loc, "{f}:{}", site.line),
            None if site.line > 0 => write!(loc, "?:{}", site.line),
            None => write!(loc, "-"),
        };
        detail.clear();
        if e.user().is_some() {
            match users.text(t, s, e) {
                Some(text) => {
                    let _ = write!(detail, "\"{text}\"");
                }
                None => detail.push_str("(arguments not recorded)"),
            }
        } else {
            args_text(&mut detail, t, s, e);
        }
        // Each name made once.
        let name = names.get(t, e, || event_name(t, e));
        line.clear();
        // As `"{:>14.3} us  {:<28} {:<6} {:<24} {}\n"` of the time in us,
        // the name, phase, place and arguments writes it, with less work.
        micros(&mut line, e.t_ns);
        line.push_str(" us  ");
        pad(&mut line, name, 28);
        line.push(' ');
        pad(&mut line, phase_name(e.phase), 6);
        line.push(' ');
        pad(&mut line, &loc, 24);
        line.push(' ');
        line.push_str(&detail);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gaspard_format::codec::UserDef;
    use gaspard_format::kinds::GASPARD_USER;

    /// Argument words of the events of [`every_shape`]: a thread of
    /// u64::MAX (an unresolved pointer-to-shared), words too few for the
    /// layout, and none.
    const WORDS: [&[u64]; 4] = [
        &[u64::MAX, 3, 0x1234, 7, u64::MAX - 5, 1, 2, 3, 4, 5, 6, 7],
        &[2, 0x100, 5, 0, 9, 1 << 40, 3, 2, 1, 0, 8, 9],
        &[1],
        &[],
    ];

    /// A stream of pointers-to-shared of `pts_bytes` with an event of every
    /// kind, phase and flags (pointers-to-shared resolved or not), once with
    /// each of [`WORDS`].
    fn every_shape(pts_bytes: u32) -> Stream {
        let mut s = Stream::empty("p", 0, 0, pts_bytes);
        for k in kinds::all_kinds() {
            for phase in 0..3u8 {
                for flags in [0u8, FLAG_PTS_RESOLVED] {
                    for w in WORDS {
                        s.push(7, k.id, phase, 0, w);
                        s.events.last_mut().unwrap().flags = flags;
                    }
                }
            }
        }
        s
    }

    /// The text dump's arguments, written in place, are the JSON's made
    /// plain: every kind, phase and pointer-to-shared size, resolved or not.
    #[test]
    fn arguments_as_text_are_the_json_made_plain() {
        let t = Trace::default();
        let mut checked = 0;
        for pts_bytes in [8u32, 16, 3] {
            let s = every_shape(pts_bytes);
            for e in &s.events {
                let json = args_json(&t, &s, e)
                    .iter()
                    .map(|(k, v)| format!("{k}={}", plain(v)))
                    .collect::<Vec<_>>()
                    .join(" ");
                let mut text = String::new();
                args_text(&mut text, &t, &s, e);
                assert_eq!(
                    text, json,
                    "kind {} phase {} flags {}",
                    e.kind, e.phase, e.flags
                );
                checked += usize::from(!json.is_empty());
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    /// Events as JSON, written as they are made, and as values: a get of a
    /// resolved pointer-to-shared, one whose bytes only are known, and user
    /// events with values (a NaN is null), without a format, and unread.
    #[test]
    fn events_as_json() {
        let def = |id: u64, desc: Option<&str>| UserDef {
            id,
            name: format!("u{id}"),
            desc: desc.map(str::to_string),
            unreadable: None,
        };
        let t = Trace {
            user_events: vec![def(1, Some("i=%d x=%g p=%p")), def(2, None)],
            callsites: vec![Default::default()],
            ..Default::default()
        };
        let mut s = Stream::empty("p", 0, 0, 3);
        let get = kinds::kind_by_name("GASP_UPC_GET").unwrap().id;
        s.push(7, get, 0, 0, &[1, 0x10, 3, 0x1234, 8]);
        s.events[0].flags = FLAG_PTS_RESOLVED;
        s.push(8, get, 0, 0, &[0, 0x10, 0x0302_0100_ffee_ddcc, 8]);
        for (u, w) in [
            (0u32, &[1, 5, 2.5f64.to_bits(), 0xbeef][..]),
            (0, &[1, u64::MAX, f64::NAN.to_bits(), 1]),
            (1, &[2]),
            (0, &[1, 5]),
        ] {
            s.push(9, GASPARD_USER, 2, 0, w);
            s.events.last_mut().unwrap().user = u;
        }
        s.events[5].flags = FLAG_ARGS_UNREAD;
        let want = [
            r#"{"t_ns":7,"kind":"GASP_UPC_GET","phase":"START","file":null,"line":0,"col":0,"args":{"is_relaxed":1,"dst":"0x10","src":{"thread":3,"addr":"0x1234"},"n":8}}"#,
            r#"{"t_ns":8,"kind":"GASP_UPC_GET","phase":"START","file":null,"line":0,"col":0,"args":{"is_relaxed":0,"dst":"0x10","src":{"bytes":"ccddee"},"n":8}}"#,
            r#"{"t_ns":9,"kind":"GASPARD_USER","phase":"ATOMIC","file":null,"line":0,"col":0,"name":"u1","values":[5,2.5,"0xbeef"],"text":"i=5 x=2.5 p=0xbeef"}"#,
            r#"{"t_ns":9,"kind":"GASPARD_USER","phase":"ATOMIC","file":null,"line":0,"col":0,"name":"u1","values":[-1,null,"0x1"],"text":"i=-1 x=nan p=0x1"}"#,
            r#"{"t_ns":9,"kind":"GASPARD_USER","phase":"ATOMIC","file":null,"line":0,"col":0,"name":"u2","values":[],"text":""}"#,
            r#"{"t_ns":9,"kind":"GASPARD_USER","phase":"ATOMIC","file":null,"line":0,"col":0,"name":"u1","args_unread":true}"#,
        ];
        let mut users = UserTexts::default();
        for (e, want) in s.events.iter().zip(want) {
            let user = e.user().is_some().then(|| users.values(&t, &s, e));
            let made = serde_json::to_string(&EventJson {
                t: &t,
                s: &s,
                e,
                user,
            })
            .unwrap();
            assert_eq!(made, want);
            assert_eq!(event_json(&t, &s, e).to_string(), want);
        }
    }

    /// Times and padding as the format strings they replace give them.
    #[test]
    fn times_and_padding_are_those_of_the_format() {
        let times = [
            0u64,
            1,
            999,
            1000,
            1234567,
            99_999_999_999_999,
            (1 << 50) - 1,
        ];
        let near = (0..2000u64).flat_map(|i| [(1 << 50) - 1 - i * 997, (1 << 40) + i * 1_000_003]);
        for ns in times
            .into_iter()
            .chain(near)
            .chain([1 << 50, (1 << 53) - 1, u64::MAX])
        {
            let mut line = String::new();
            micros(&mut line, ns);
            assert_eq!(line, format!("{:>14.3}", ns as f64 / 1000.0), "{ns}");
        }
        for s in [
            "",
            "GASP_UPC_GET",
            "é€x",
            "a name longer than twenty-eight characters",
        ] {
            let mut line = String::new();
            pad(&mut line, s, 28);
            assert_eq!(line, format!("{s:<28}"));
        }
    }

    /// A user event's text in the dump, its format parsed once, is
    /// [`user_values`]' text: with a format, without one, with one that
    /// does not parse, and with arguments not read.
    #[test]
    fn user_event_texts_are_those_of_their_values() {
        let def = |id: u64, desc: Option<&str>, unreadable: Option<&str>| UserDef {
            id,
            name: format!("u{id}"),
            desc: desc.map(str::to_string),
            unreadable: unreadable.map(str::to_string),
        };
        let t = Trace {
            user_events: vec![
                def(1, Some("i=%d x=%g"), None),
                def(2, None, None),
                def(3, Some("%q %"), None),
                def(4, Some("%d"), Some("a va_list")),
            ],
            ..Default::default()
        };
        let mut s = Stream::empty("p", 0, 0, 8);
        let mut users = UserTexts::default();
        let mut seen = Vec::new();
        for (u, flags) in [
            (0, 0),
            (0, 0),
            (1, 0),
            (2, 0),
            (3, 0),
            (0, FLAG_ARGS_UNREAD),
        ] {
            s.push(0, GASPARD_USER, 2, 0, &[u as u64 + 1, 5, 2.5f64.to_bits()]);
            let e = s.events.last_mut().unwrap();
            e.user = u;
            e.flags = flags;
            let e = s.events.last().unwrap();
            let want = user_values(&t, &s, e).map(|(_, text)| text);
            assert_eq!(users.text(&t, &s, e), want, "user event {u}, flags {flags}");
            seen.push(want);
        }
        assert_eq!(seen[0].as_deref(), Some("i=5 x=2.5"));
        assert_eq!(seen[2].as_deref(), Some(""));
        assert_eq!(seen[5], None);
    }
}
