//! The per-process manifest: a text file of `key value` lines.
//!
//! Written once when the process starts recording (status `running`) and
//! replaced atomically when it stops (`complete`, or `crashed <signal>`), so a
//! reader can tell a finished process from one that died.

use std::fmt::Write as _;

/// Escapes whitespace, `%` and control characters as `%XX`.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b <= b' ' || b == b'%' || b == b'=' || b == 0x7f {
            let _ = write!(out, "%{b:02X}");
        } else {
            out.push(b as char);
        }
    }
    // Bytes >= 0x80 were pushed as chars above only if ASCII; redo for UTF-8 safety.
    if s.is_ascii() {
        out
    } else {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            if c.is_ascii() && (c as u8 <= b' ' || c == '%' || c == '=' || c as u8 == 0x7f) {
                let _ = write!(out, "%{:02X}", c as u8);
            } else {
                out.push(c);
            }
        }
        out
    }
}

/// Reverses [`escape`]; malformed escapes are kept as written.
pub fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `YYYYMMDD-HHMMSS` in UTC, for default trace directory names.
pub fn utc_stamp(unix_secs: u64) -> String {
    let days = (unix_secs / 86400) as i64;
    let rem = unix_secs % 86400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// One stream of a process, as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamEntry {
    /// Stream number within the process.
    pub id: u32,
    /// File name, relative to the trace directory.
    pub file: String,
    /// `gasp_model_t` of the context that wrote it.
    pub model: u32,
    /// Kernel thread id.
    pub tid: u64,
    /// Order in which the process's threads initialised.
    pub thread: u32,
}

/// A process's manifest.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Manifest {
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// The command line.
    pub command: Vec<String>,
    /// Wall-clock start, nanoseconds since the Unix epoch.
    pub start_unix_ns: u64,
    /// `tsc` or `monotonic`.
    pub clock: String,
    /// (ticks, CLOCK_MONOTONIC ns) pairs read together.
    pub clock_refs: Vec<(u64, u64)>,
    /// (CLOCK_MONOTONIC ns, Unix ns) read together at start.
    pub realtime_ref: (u64, u64),
    /// Bytes recorded for each pointer-to-shared argument.
    pub pts_bytes: u32,
    /// The streams.
    pub streams: Vec<StreamEntry>,
    /// `running`, `complete`, or `crashed SIGNAME`.
    pub status: String,
    /// Events written.
    pub events: u64,
    /// Events lost (dropped under a memory cap, or not written).
    pub lost: u64,
    /// Events with a tag the tool does not know (ignored, as the spec requires).
    pub unknown_tags: u64,
    /// Notes on anything else the reader should know.
    pub notes: Vec<String>,
}

/// The first line of every manifest.
pub const MANIFEST_MAGIC: &str = "gaspard-manifest";

impl Manifest {
    /// Serializes.
    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MANIFEST_MAGIC} {}", crate::FORMAT_VERSION);
        let _ = writeln!(s, "host {}", escape(&self.host));
        let _ = writeln!(s, "pid {}", self.pid);
        let cmd: Vec<String> = self.command.iter().map(|a| escape(a)).collect();
        let _ = writeln!(s, "command {}", cmd.join(" "));
        let _ = writeln!(s, "start_unix_ns {}", self.start_unix_ns);
        let _ = writeln!(s, "clock {}", escape(&self.clock));
        for (t, n) in &self.clock_refs {
            let _ = writeln!(s, "clock_ref {t} {n}");
        }
        let _ = writeln!(
            s,
            "realtime_ref {} {}",
            self.realtime_ref.0, self.realtime_ref.1
        );
        let _ = writeln!(s, "pts_bytes {}", self.pts_bytes);
        for st in &self.streams {
            let _ = writeln!(
                s,
                "stream {} {} model={} tid={} thread={}",
                st.id,
                escape(&st.file),
                st.model,
                st.tid,
                st.thread
            );
        }
        let _ = writeln!(s, "events {}", self.events);
        let _ = writeln!(s, "lost {}", self.lost);
        let _ = writeln!(s, "unknown_tags {}", self.unknown_tags);
        for n in &self.notes {
            let _ = writeln!(s, "note {}", escape(n));
        }
        let _ = writeln!(s, "status {}", self.status);
        s
    }

    /// Parses; unknown keys are skipped so that newer writers stay readable.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        let mut lines = text.lines();
        let first = lines.next().unwrap_or("");
        let Some(ver) = first.strip_prefix(MANIFEST_MAGIC) else {
            return Err("not a gaspard manifest".into());
        };
        let ver: u32 = ver
            .trim()
            .parse()
            .map_err(|_| "bad manifest version line")?;
        if ver != crate::FORMAT_VERSION {
            return Err(format!(
                "manifest version {ver}, this gaspard reads {}",
                crate::FORMAT_VERSION
            ));
        }
        let mut m = Manifest::default();
        for (no, line) in lines.enumerate() {
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            let bad = || format!("manifest line {}: cannot read '{line}'", no + 2);
            let num = |v: &str| v.trim().parse::<u64>().map_err(|_| bad());
            match key {
                "host" => m.host = unescape(rest),
                "pid" => m.pid = num(rest)? as u32,
                "command" => {
                    m.command = rest
                        .split(' ')
                        .filter(|a| !a.is_empty())
                        .map(unescape)
                        .collect()
                }
                "start_unix_ns" => m.start_unix_ns = num(rest)?,
                "clock" => m.clock = unescape(rest),
                "clock_ref" | "realtime_ref" => {
                    let (a, b) = rest.split_once(' ').ok_or_else(bad)?;
                    let pair = (num(a)?, num(b)?);
                    if key == "clock_ref" {
                        m.clock_refs.push(pair);
                    } else {
                        m.realtime_ref = pair;
                    }
                }
                "pts_bytes" => m.pts_bytes = num(rest)? as u32,
                "stream" => {
                    let mut parts = rest.split(' ');
                    let id = num(parts.next().unwrap_or(""))? as u32;
                    let file = unescape(parts.next().ok_or_else(bad)?);
                    let mut st = StreamEntry {
                        id,
                        file,
                        ..Default::default()
                    };
                    for p in parts {
                        match p.split_once('=') {
                            Some(("model", v)) => st.model = num(v)? as u32,
                            Some(("tid", v)) => st.tid = num(v)?,
                            Some(("thread", v)) => st.thread = num(v)? as u32,
                            _ => {}
                        }
                    }
                    m.streams.push(st);
                }
                "events" => m.events = num(rest)?,
                "lost" => m.lost = num(rest)?,
                "unknown_tags" => m.unknown_tags = num(rest)?,
                "note" => m.notes.push(unescape(rest)),
                // Trimmed: a stray carriage return or blank after the status
                // must neither hide `complete` nor be written back.
                "status" => m.status = rest.trim().to_string(),
                _ => {}
            }
        }
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamp() {
        assert_eq!(utc_stamp(0), "19700101-000000");
        assert_eq!(utc_stamp(1_795_000_000), "20261118-110640");
    }

    #[test]
    fn escape_round_trip() {
        for s in ["plain", "a b\tc\n", "100%", "k=v", "héllo wörld", ""] {
            assert_eq!(unescape(&escape(s)), s);
        }
    }

    #[test]
    fn manifest_round_trip() {
        let m = Manifest {
            host: "node 1".into(),
            pid: 42,
            command: vec!["./app".into(), "a b".into()],
            start_unix_ns: 7,
            clock: "tsc".into(),
            clock_refs: vec![(1, 2), (3, 4)],
            realtime_ref: (5, 6),
            pts_bytes: 16,
            streams: vec![StreamEntry {
                id: 0,
                file: "x.gst".into(),
                model: 0,
                tid: 9,
                thread: 0,
            }],
            status: "crashed SIGSEGV".into(),
            events: 10,
            lost: 1,
            unknown_tags: 2,
            notes: vec!["a note".into()],
        };
        assert_eq!(Manifest::parse(&m.to_text()).unwrap(), m);
        assert!(Manifest::parse("hello").is_err());
    }

    #[test]
    fn status_with_stray_blanks_round_trips() {
        // Found by the fuzzer: "status complete\r\r" read as "complete\r",
        // which was written back as a line that read as "complete".
        let m = Manifest::parse("gaspard-manifest 2\nstatus complete\r\r\x0c \n").unwrap();
        assert_eq!(m.status, "complete");
        assert_eq!(Manifest::parse(&m.to_text()).unwrap(), m);
    }
}
