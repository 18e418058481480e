//! The profile file of a process recorded in profile-only mode
//! (`GASPARD_PROFILE_ONLY=1`): counts, times and bytes per event name and
//! callsite for each of its streams, in place of its events.
//!
//! Text, one record per line, fields separated by tabs and escaped as in the
//! manifest:
//!
//! ```text
//! gaspard-profile 1
//! stream <id> <tid> <thread> <model> <events> <span_ns>
//! row <stream> <name> <file or empty> <line> <count> <intervals> <total_ns> <min_ns> <max_ns> <bytes> <sum_ns> [<code>]
//! ```
//!
//! `code` is the return address (hexadecimal) of a row whose events have no
//! source position of their own but a `codeptr`: the reader turns it into a
//! file and line with the process's maps, as it does for events. It is
//! written only where there is one; a row without it reads as 0.
//!
//! `total_ns` counts the time within at least one of a row's pairs on the
//! stream (a recursive function's nested calls are within its outer one),
//! `sum_ns` the pairs' times all added (for their mean); files without it
//! (written before it was) have the sum as `total_ns`.

use crate::manifest::{escape, unescape};

/// First line of a profile file.
pub const PROFILE_MAGIC: &str = "gaspard-profile 1";

/// One stream's totals.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileStream {
    /// Stream id within the process.
    pub id: u32,
    /// Kernel thread id.
    pub tid: u64,
    /// Order of the thread within its process.
    pub thread: u32,
    /// `gasp_model_t`.
    pub model: u32,
    /// Events recorded.
    pub events: u64,
    /// From its first event to its last, in ns.
    pub span_ns: u64,
}

/// Statistics of one event name at one callsite on one stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileRow {
    /// Stream id.
    pub stream: u32,
    /// Event name, as reports name it.
    pub name: String,
    /// Source file, if known.
    pub file: Option<String>,
    /// Source line, 0 when unknown.
    pub line: u32,
    /// Occurrences (a START/END pair once, an ATOMIC once).
    pub count: u64,
    /// Closed START/END pairs.
    pub intervals: u64,
    /// Time within at least one of the pairs, ns.
    pub total_ns: u64,
    /// The pairs' times added, nested ones included, ns.
    pub sum_ns: u64,
    /// Shortest pair, ns.
    pub min_ns: u64,
    /// Longest pair, ns.
    pub max_ns: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// The return address the row's events were made from, when they have
    /// no file (0: none or a file).
    pub code: u64,
}

/// A whole profile file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileFile {
    /// Its streams.
    pub streams: Vec<ProfileStream>,
    /// Its rows.
    pub rows: Vec<ProfileRow>,
}

impl ProfileFile {
    /// The file's text.
    pub fn to_text(&self) -> String {
        let mut out = String::from(PROFILE_MAGIC);
        out.push('\n');
        for s in &self.streams {
            out.push_str(&format!(
                "stream\t{}\t{}\t{}\t{}\t{}\t{}\n",
                s.id, s.tid, s.thread, s.model, s.events, s.span_ns
            ));
        }
        for r in &self.rows {
            out.push_str(&format!(
                "row\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}{}\n",
                r.stream,
                escape(&r.name),
                r.file.as_deref().map(escape).unwrap_or_default(),
                r.line,
                r.count,
                r.intervals,
                r.total_ns,
                r.min_ns,
                r.max_ns,
                r.bytes,
                r.sum_ns,
                // Only where there is one: the rows without stay readable by
                // readers that know twelve fields.
                if r.code != 0 {
                    format!("\t{:x}", r.code)
                } else {
                    String::new()
                }
            ));
        }
        out
    }

    /// Reads a profile file; an error names the line.
    pub fn parse(text: &str) -> Result<ProfileFile, String> {
        let mut lines = text.lines();
        if lines.next() != Some(PROFILE_MAGIC) {
            return Err(format!("not a profile file (no '{PROFILE_MAGIC}' line)"));
        }
        let mut f = ProfileFile::default();
        for (i, line) in lines.enumerate() {
            let n = i + 2;
            let fields: Vec<&str> = line.split('\t').collect();
            let num = |k: usize| -> Result<u64, String> {
                fields
                    .get(k)
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("line {n}: field {k} is not a number"))
            };
            match fields[0] {
                "stream" if fields.len() == 7 => f.streams.push(ProfileStream {
                    id: num(1)? as u32,
                    tid: num(2)?,
                    thread: num(3)? as u32,
                    model: num(4)? as u32,
                    events: num(5)?,
                    span_ns: num(6)?,
                }),
                "row" if (11..=13).contains(&fields.len()) => f.rows.push(ProfileRow {
                    stream: num(1)? as u32,
                    name: unescape(fields[2]),
                    file: (!fields[3].is_empty()).then(|| unescape(fields[3])),
                    line: num(4)? as u32,
                    count: num(5)?,
                    intervals: num(6)?,
                    total_ns: num(7)?,
                    min_ns: num(8)?,
                    max_ns: num(9)?,
                    bytes: num(10)?,
                    sum_ns: if fields.len() >= 12 {
                        num(11)?
                    } else {
                        num(7)?
                    },
                    code: match fields.get(12) {
                        Some(v) => u64::from_str_radix(v, 16).map_err(|_| {
                            format!("line {n}: field 12 is not a hexadecimal address")
                        })?,
                        None => 0,
                    },
                }),
                "" => {}
                _ => return Err(format!("line {n}: unknown record")),
            }
        }
        Ok(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let f = ProfileFile {
            streams: vec![ProfileStream {
                id: 1,
                tid: 77,
                thread: 0,
                model: 0,
                events: 10,
                span_ns: 99,
            }],
            rows: vec![ProfileRow {
                stream: 1,
                name: "GASP_C_FUNC int f(int a, char *b)".into(),
                file: Some("/a dir/x.c".into()),
                line: 3,
                count: 5,
                intervals: 5,
                total_ns: 50,
                sum_ns: 60,
                min_ns: 1,
                max_ns: 20,
                bytes: 0,
                code: 0x55d0_1234_5678,
            }],
        };
        assert_eq!(ProfileFile::parse(&f.to_text()), Ok(f.clone()));
        // A row without a return address has the twelve fields of before.
        let mut plain = f.clone();
        plain.rows[0].code = 0;
        let text = plain.to_text();
        assert_eq!(text.lines().last().unwrap().split('\t').count(), 12);
        assert_eq!(ProfileFile::parse(&text), Ok(plain));
        assert!(ProfileFile::parse("nope").is_err());
        // A row of a file written before the sum was: the sum is the total.
        let old = format!("{PROFILE_MAGIC}\nrow\t1\tx\t\t0\t2\t2\t40\t10\t30\t0\n");
        let r = &ProfileFile::parse(&old).unwrap().rows[0];
        assert_eq!((r.total_ns, r.sum_ns, r.code), (40, 40, 0));
        let bad = format!("{PROFILE_MAGIC}\nrow\t1\tx\t\t0\t2\t2\t40\t10\t30\t0\t40\tzz\n");
        assert_eq!(
            ProfileFile::parse(&bad),
            Err("line 2: field 12 is not a hexadecimal address".into())
        );
        let bad = format!("{PROFILE_MAGIC}\nrow\t1\tx\t\t0\tz\t0\t0\t0\t0\t0\n");
        assert_eq!(
            ProfileFile::parse(&bad),
            Err("line 2: field 5 is not a number".into())
        );
    }
}
