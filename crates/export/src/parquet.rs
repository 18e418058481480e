//! Parquet tables, for SQL engines and data frames (DuckDB, pandas, Spark):
//! `events.parquet`, one row per event, and `communication.parquet`, one row
//! per MPI or OpenSHMEM operation with a peer (as the communication matrices
//! count them).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use gaspard_analyze::dump::{event_name, phase_name};
use gaspard_analyze::intervals::intervals;
use parquet::basic::{Compression, Encoding};
use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use parquet::schema::types::ColumnPath;
use rustc_hash::FxHashMap as HashMap;

use crate::{location_name, Model, Summary};

/// Rows per row group.
const ROW_GROUP: usize = 1 << 18;

/// `s` as a value of a string column whose copies share its bytes without
/// counting them: a column holds one value per row, each a copy of one of a
/// few names, and copying and dropping a counted value (an atomic operation
/// each) took a third of the time of writing the tables. The bytes are kept
/// once per distinct string for the rest of the process (the names of the
/// traces exported: processes, threads, events, files, objects).
fn interned(s: &str) -> ByteArray {
    static KEPT: std::sync::Mutex<Option<rustc_hash::FxHashSet<&'static str>>> =
        std::sync::Mutex::new(None);
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    let kept = kept.get_or_insert_with(Default::default);
    let s: &'static str = match kept.get(s) {
        Some(&k) => k,
        None => {
            let k: &'static str = Box::leak(s.to_owned().into_boxed_str());
            kept.insert(k);
            k
        }
    };
    ByteArray::from(bytes::Bytes::from_static(s.as_bytes()))
}

enum Data {
    I64(Vec<i64>),
    Str(Vec<ByteArray>),
}

struct Column {
    optional: bool,
    data: Data,
    defs: Vec<i16>,
    /// A string column's values met so far (up to [`CACHED`]): a row's
    /// value shares the bytes of the same value met before instead of
    /// copying them (most columns repeat a few names).
    cache: HashMap<String, ByteArray>,
}

/// Most distinct values a string column keeps for sharing.
const CACHED: usize = 4096;

/// A table written in row groups.
struct Table {
    writer: SerializedFileWriter<File>,
    cols: Vec<Column>,
    rows: usize,
    total: u64,
}

/// Column kinds of a schema line.
enum Ty {
    I64,
    /// Values that mostly differ from row to row and grow (times): stored
    /// as their differences, bit-packed (`DELTA_BINARY_PACKED`), rather
    /// than in a dictionary, which would take the first half of each row
    /// group's values only to be dropped for plain values.
    Distinct,
    Str,
}

impl Table {
    fn create(path: &Path, name: &str, cols: &[(&str, Ty, bool)]) -> Result<Table> {
        let mut schema = format!("message {name} {{\n");
        for (n, ty, optional) in cols {
            let rep = if *optional { "optional" } else { "required" };
            match ty {
                Ty::I64 | Ty::Distinct => schema.push_str(&format!("  {rep} int64 {n};\n")),
                Ty::Str => schema.push_str(&format!("  {rep} binary {n} (STRING);\n")),
            }
        }
        schema.push('}');
        let schema = Arc::new(parse_message_type(&schema)?);
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        // Snappy: fast, and the dictionary-encoded columns shrink further.
        let props = cols
            .iter()
            .filter(|(_, ty, _)| matches!(ty, Ty::Distinct))
            .fold(
                WriterProperties::builder().set_compression(Compression::SNAPPY),
                |b, (n, _, _)| {
                    b.set_column_dictionary_enabled(ColumnPath::from(*n), false)
                        .set_column_encoding(ColumnPath::from(*n), Encoding::DELTA_BINARY_PACKED)
                },
            );
        let props = Arc::new(props.build());
        let writer = SerializedFileWriter::new(file, schema, props)?;
        Ok(Table {
            writer,
            cols: cols
                .iter()
                .map(|(_, ty, optional)| Column {
                    optional: *optional,
                    data: match ty {
                        Ty::I64 | Ty::Distinct => Data::I64(Vec::new()),
                        Ty::Str => Data::Str(Vec::new()),
                    },
                    defs: Vec::new(),
                    cache: HashMap::default(),
                })
                .collect(),
            rows: 0,
            total: 0,
        })
    }

    #[inline]
    fn i(&mut self, c: usize, v: Option<i64>) {
        let col = &mut self.cols[c];
        // (A required column's levels are not written.)
        if col.optional {
            col.defs.push(v.is_some() as i16);
        }
        if let (Data::I64(d), Some(v)) = (&mut col.data, v) {
            d.push(v);
        }
    }

    fn s(&mut self, c: usize, v: Option<&str>) {
        let col = &mut self.cols[c];
        if col.optional {
            col.defs.push(v.is_some() as i16);
        }
        if let (Data::Str(d), Some(v)) = (&mut col.data, v) {
            let b = match col.cache.get(v) {
                Some(b) => b.clone(),
                None if col.cache.len() < CACHED => {
                    let b = interned(v);
                    col.cache.insert(v.to_string(), b.clone());
                    b
                }
                None => ByteArray::from(v),
            };
            d.push(b);
        }
    }

    /// [`Table::s`] of a value made by the caller (kept for the values
    /// that repeat: no string hashed per row).
    #[inline]
    fn b(&mut self, c: usize, v: Option<&ByteArray>) {
        let col = &mut self.cols[c];
        if col.optional {
            col.defs.push(v.is_some() as i16);
        }
        if let (Data::Str(d), Some(v)) = (&mut col.data, v) {
            d.push(v.clone());
        }
    }

    fn end_row(&mut self) -> Result<()> {
        self.rows += 1;
        self.total += 1;
        if self.rows >= ROW_GROUP {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.rows == 0 {
            return Ok(());
        }
        let mut rg = self.writer.next_row_group()?;
        for col in &mut self.cols {
            let mut cw = rg
                .next_column()?
                .context("the table has fewer columns than its schema")?;
            let defs = col.optional.then_some(col.defs.as_slice());
            match &mut col.data {
                Data::I64(v) => {
                    cw.typed::<Int64Type>().write_batch(v, defs, None)?;
                    v.clear();
                }
                Data::Str(v) => {
                    cw.typed::<ByteArrayType>().write_batch(v, defs, None)?;
                    v.clear();
                }
            }
            col.defs.clear();
            cw.close()?;
        }
        rg.close()?;
        self.rows = 0;
        Ok(())
    }

    fn close(mut self) -> Result<u64> {
        self.flush()?;
        self.writer.close()?;
        Ok(self.total)
    }
}

/// Writes `out/events.parquet` and `out/communication.parquet`.
pub fn write(m: &Model, out: &Path, progress: &indicatif::ProgressBar) -> Result<Summary> {
    let mut w = Writer::open(out)?;
    w.write_part(m, &m.ranks, progress)?;
    w.finish()
}

/// The two tables being written: the streams of the whole trace, or of one
/// process after another.
pub(crate) struct Writer {
    out: std::path::PathBuf,
    ev: Table,
    cm: Table,
    /// Streams of the parts written before.
    streams_before: usize,
}

impl Writer {
    pub(crate) fn open(out: &Path) -> Result<Writer> {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let ev = Table::create(
            &out.join("events.parquet"),
            "events",
            &[
                ("process", Ty::Str, false),
                ("pid", Ty::I64, false),
                ("thread", Ty::I64, false),
                ("thread_name", Ty::Str, false),
                ("rank", Ty::I64, true),
                ("t_ns", Ty::Distinct, false),
                ("dur_ns", Ty::I64, true),
                ("kind", Ty::Str, false),
                ("phase", Ty::Str, false),
                ("file", Ty::Str, true),
                ("line", Ty::I64, true),
                ("peer", Ty::I64, true),
                ("bytes", Ty::I64, true),
                ("object", Ty::Str, true),
                ("offset", Ty::I64, true),
            ],
        )?;
        let cm = Table::create(
            &out.join("communication.parquet"),
            "communication",
            &[
                ("model", Ty::Str, false),
                ("kind", Ty::Str, false),
                ("src_thread", Ty::I64, false),
                ("dst_thread", Ty::I64, true),
                ("src_rank", Ty::I64, false),
                ("dst_rank", Ty::I64, false),
                ("bytes", Ty::I64, false),
                ("tag", Ty::I64, true),
                ("t_start", Ty::Distinct, false),
                ("t_end", Ty::Distinct, false),
                ("object", Ty::Str, true),
                ("object_offset", Ty::I64, true),
            ],
        )?;
        Ok(Writer {
            out: out.to_path_buf(),
            ev,
            cm,
            streams_before: 0,
        })
    }

    /// Writes the rows of the streams of `m`'s trace and of their
    /// operations; `ranks`: per model, the stream (of the whole trace) of
    /// each rank's first thread.
    pub(crate) fn write_part(
        &mut self,
        m: &Model,
        ranks: &HashMap<&'static str, Vec<Option<usize>>>,
        progress: &indicatif::ProgressBar,
    ) -> Result<()> {
        let t = m.trace;
        let first = self.streams_before;
        let ev = &mut self.ev;
        // The values that repeat from row to row, made once: an event's name by
        // its kind, user event and text (the text by where it is), the phases,
        // a callsite's file, an object's name.
        let mut name_of = gaspard_analyze::dump::PerName::default();
        let phases: Vec<ByteArray> = (0..=3u8).map(|p| interned(phase_name(p))).collect();
        let files: Vec<Option<ByteArray>> = t
            .callsites
            .iter()
            .map(|c| c.file.as_deref().map(interned))
            .collect();
        let objects: Vec<ByteArray> = m.windows.iter().map(|w| interned(&w.name)).collect();
        for (si, s) in t.streams.iter().enumerate() {
            let name = location_name(m, si);
            let (process_b, name_b) = (interned(&s.process), interned(&name));
            let rank = m.stream_rank[si].map(|r| r.1 as i64);
            // Each START's duration, by event (u64::MAX: none).
            let mut dur = vec![u64::MAX; s.events.len()];
            for iv in intervals(s) {
                dur[iv.start_event as usize] = iv.end.saturating_sub(iv.start);
            }
            for (i, e) in s.events.iter().enumerate() {
                let op = m.op_at[si].get(&i).map(|&o| &m.ops[o]);
                let site = t.callsites.get(e.callsite as usize);
                ev.b(0, Some(&process_b));
                ev.i(1, Some(s.pid as i64));
                ev.i(2, Some((first + si) as i64));
                ev.b(3, Some(&name_b));
                ev.i(4, rank);
                ev.i(5, Some(e.t_ns as i64));
                ev.i(6, (dur[i] != u64::MAX).then_some(dur[i] as i64));
                let kind = name_of.get(t, e, || interned(&event_name(t, e)));
                ev.b(7, Some(kind));
                match phases.get(e.phase as usize) {
                    Some(p) => ev.b(8, Some(p)),
                    None => ev.s(8, Some(phase_name(e.phase))),
                }
                ev.b(9, files.get(e.callsite as usize).and_then(Option::as_ref));
                ev.i(10, site.filter(|c| c.line > 0).map(|c| c.line as i64));
                ev.i(11, op.and_then(|o| o.peer).map(|p| p as i64));
                ev.i(12, op.map(|o| o.bytes as i64));
                ev.b(13, op.and_then(|o| o.window).map(|w| &objects[w]));
                ev.i(14, op.and_then(|o| o.offset).map(|o| o as i64));
                ev.end_row()?;
            }
            progress.inc(s.events.len() as u64);
        }
        for op in &m.ops {
            let Some(peer) = op.peer else {
                continue;
            };
            self.cm.s(0, Some(op.model));
            self.cm.s(1, Some(op.name));
            self.cm.i(2, Some((first + op.stream) as i64));
            self.cm.i(
                3,
                ranks
                    .get(op.model)
                    .and_then(|r| r.get(peer).copied().flatten())
                    .map(|s| s as i64),
            );
            self.cm.i(4, Some(op.me as i64));
            self.cm.i(5, Some(peer as i64));
            self.cm.i(6, Some(op.bytes as i64));
            self.cm.i(7, op.tag.map(|t| t as i64));
            self.cm.i(8, Some(op.t_start as i64));
            self.cm.i(9, Some(op.t_end as i64));
            self.cm.s(10, op.window.map(|w| m.windows[w].name.as_str()));
            self.cm.i(11, op.offset.map(|o| o as i64));
            self.cm.end_row()?;
        }
        self.streams_before += t.streams.len();
        Ok(())
    }

    pub(crate) fn finish(self) -> Result<Summary> {
        let events = self.ev.close()?;
        let comms = self.cm.close()?;
        let out = self.out;
        Ok(Summary {
            lines: vec![
                format!("{}: {events} events", out.join("events.parquet").display()),
                format!(
                    "{}: {comms} operations",
                    out.join("communication.parquet").display()
                ),
            ],
        })
    }
}
