//! The view index: what the browser view needs to open a trace again at
//! once, kept in one small file per trace.
//!
//! It holds the trace's time span, its thread names, span names and
//! callsites, each thread's timeline pyramid ([`ThreadLine::levels`]) and,
//! once computed, the report's summary; not the events. It lives next to
//! the trace (`DIR/view.gvi`) or, where the trace directory cannot be
//! written, in `$XDG_CACHE_HOME/gaspard/` (else `~/.cache/gaspard/`) under
//! a hash of the directory's canonical path. A fingerprint of the trace
//! (name, size and modification time of every stream, manifest, profile and
//! process map file) tells whether it is still the trace's: any change makes
//! it out of date, and it is rebuilt.
//!
//! Layout (integers little-endian): `GVIX`, the format version (u32), the
//! body's length (u64) and CRC-32 (u32), then the body: the directory's
//! canonical path, the block size of the report, the fingerprint, t0 and t1,
//! names, callsites, threads (name, then every pyramid level's bins), the
//! summary's JSON text if known, and where the chunks of a window are
//! ([`gaspard_analyze::scan::Windows`], when an overview found them).
//! Strings are a u32 length and UTF-8.
//!
//! [`ThreadLine::levels`]: crate::timeline::ThreadLine::levels

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use gaspard_analyze::trace::Callsite;

use crate::timeline::Timeline;

const MAGIC: &[u8; 4] = b"GVIX";
/// Changes whenever the layout, or what the pyramids mean, does.
const VERSION: u32 = 2;
/// The index's name in the trace directory.
pub const FILE_NAME: &str = "view.gvi";

/// One trace file as the fingerprint knows it: name, size, modification
/// time (ns since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    name: String,
    size: u64,
    mtime_ns: u64,
}

/// Bytes of the stream files among `stamps`.
pub fn stream_bytes(stamps: &[FileStamp]) -> u64 {
    stamps
        .iter()
        .filter(|s| s.name.ends_with(".gst"))
        .map(|s| s.size)
        .sum()
}

/// What the index holds.
#[derive(Debug)]
pub struct Index {
    /// The trace's files when it was read.
    pub fingerprint: Vec<FileStamp>,
    /// Bytes per block of the report in `summary`.
    pub block_size: u64,
    /// The timeline's time span.
    pub t0: u64,
    /// End of the time span.
    pub t1: u64,
    /// Span names.
    pub names: Vec<String>,
    /// Callsites.
    pub callsites: Vec<Callsite>,
    /// Each thread's name and pyramid levels.
    pub threads: Vec<(String, Vec<Vec<[u8; 2]>>)>,
    /// The report's summary (without the core), JSON text.
    pub summary: Option<String>,
    /// [`gaspard_analyze::scan::Windows::to_bytes`], if known.
    pub windows: Option<Vec<u8>>,
}

impl Index {
    /// The index of a timeline and its callsites.
    pub fn of(
        fingerprint: Vec<FileStamp>,
        block_size: u64,
        tl: &Timeline,
        callsites: &[Callsite],
        summary: Option<String>,
        windows: Option<Vec<u8>>,
    ) -> Index {
        Index {
            fingerprint,
            block_size,
            t0: tl.t0,
            t1: tl.t1,
            names: tl.names.clone(),
            callsites: callsites.to_vec(),
            threads: tl
                .threads
                .iter()
                .map(|th| (th.name.clone(), th.levels().to_vec()))
                .collect(),
            summary,
            windows,
        }
    }

    /// The index as bytes.
    pub fn encode(&self, dir: &Path) -> Vec<u8> {
        let mut b = Vec::new();
        put_str(&mut b, &dir.to_string_lossy());
        put_u64(&mut b, self.block_size);
        put_u32(&mut b, self.fingerprint.len() as u32);
        for f in &self.fingerprint {
            put_str(&mut b, &f.name);
            put_u64(&mut b, f.size);
            put_u64(&mut b, f.mtime_ns);
        }
        put_u64(&mut b, self.t0);
        put_u64(&mut b, self.t1);
        put_u32(&mut b, self.names.len() as u32);
        for n in &self.names {
            put_str(&mut b, n);
        }
        put_u32(&mut b, self.callsites.len() as u32);
        for c in &self.callsites {
            match &c.file {
                Some(f) => {
                    b.push(1);
                    put_str(&mut b, f);
                }
                None => b.push(0),
            }
            put_u32(&mut b, c.line);
            put_u32(&mut b, c.col);
        }
        put_u32(&mut b, self.threads.len() as u32);
        for (name, levels) in &self.threads {
            put_str(&mut b, name);
            put_u32(&mut b, levels.len() as u32);
            for level in levels {
                put_u32(&mut b, level.len() as u32);
                for bin in level {
                    b.extend_from_slice(bin);
                }
            }
        }
        match &self.summary {
            Some(s) => {
                b.push(1);
                put_u64(&mut b, s.len() as u64);
                b.extend_from_slice(s.as_bytes());
            }
            None => b.push(0),
        }
        match &self.windows {
            Some(w) => {
                b.push(1);
                put_u64(&mut b, w.len() as u64);
                b.extend_from_slice(w);
            }
            None => b.push(0),
        }
        let mut out = Vec::with_capacity(b.len() + 20);
        out.extend_from_slice(MAGIC);
        put_u32(&mut out, VERSION);
        put_u64(&mut out, b.len() as u64);
        put_u32(&mut out, crc32fast::hash(&b));
        out.extend_from_slice(&b);
        out
    }

    /// The index in `bytes`, if it is one of this version for `dir`; else
    /// why not.
    pub fn decode(bytes: &[u8], dir: &Path) -> Result<Index, String> {
        let mut r = Reader { b: bytes };
        if r.take(4)? != MAGIC {
            return Err("not a view index".into());
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(format!(
                "format version {version}, this gaspard reads version {VERSION}"
            ));
        }
        let len = r.u64()?;
        let crc = r.u32()?;
        if len != r.b.len() as u64 {
            return Err("cut short or lengthened".into());
        }
        if crc32fast::hash(r.b) != crc {
            return Err("checksum mismatch".into());
        }
        if r.str()? != dir.to_string_lossy() {
            return Err("made for another directory".into());
        }
        let block_size = r.u64()?;
        let n = r.count(17)?;
        let mut fingerprint = Vec::with_capacity(n);
        for _ in 0..n {
            fingerprint.push(FileStamp {
                name: r.str()?,
                size: r.u64()?,
                mtime_ns: r.u64()?,
            });
        }
        let (t0, t1) = (r.u64()?, r.u64()?);
        let n = r.count(4)?;
        let names = (0..n).map(|_| r.str()).collect::<Result<Vec<_>, _>>()?;
        let n = r.count(9)?;
        let mut callsites = Vec::with_capacity(n);
        for _ in 0..n {
            let file = match r.take(1)?[0] {
                0 => None,
                1 => Some(r.str()?),
                _ => return Err("bad callsite".into()),
            };
            callsites.push(Callsite {
                file,
                line: r.u32()?,
                col: r.u32()?,
            });
        }
        let n = r.count(8)?;
        let mut threads = Vec::with_capacity(n);
        for _ in 0..n {
            let name = r.str()?;
            let nl = r.count(4)?;
            let mut levels = Vec::with_capacity(nl);
            for _ in 0..nl {
                let bins = r.count(2)?;
                let raw = r.take(bins * 2)?;
                levels.push(raw.chunks_exact(2).map(|c| [c[0], c[1]]).collect());
            }
            threads.push((name, levels));
        }
        let summary = match r.take(1)?[0] {
            0 => None,
            1 => {
                let n = r.u64()?;
                let n = usize::try_from(n).map_err(|_| "bad summary length".to_string())?;
                let s = std::str::from_utf8(r.take(n)?)
                    .map_err(|_| "bad summary text".to_string())?
                    .to_string();
                Some(s)
            }
            _ => return Err("bad summary flag".into()),
        };
        let windows = match r.take(1)?[0] {
            0 => None,
            1 => {
                let n = usize::try_from(r.u64()?).map_err(|_| "bad windows length".to_string())?;
                Some(r.take(n)?.to_vec())
            }
            _ => return Err("bad windows flag".into()),
        };
        if !r.b.is_empty() {
            return Err("bytes after the end".into());
        }
        let index = Index {
            fingerprint,
            block_size,
            t0,
            t1,
            names,
            callsites,
            threads,
            summary,
            windows,
        };
        // The pyramids are checked by building the timeline once.
        index.timeline().ok_or("bad pyramid")?;
        Ok(index)
    }

    /// The timeline of the index (pyramids, no spans).
    pub fn timeline(&self) -> Option<Timeline> {
        Timeline::from_levels(self.t0, self.t1, self.names.clone(), self.threads.clone())
    }

    /// [`Index::timeline`], taking the index's threads.
    pub fn take_timeline(&mut self) -> Option<Timeline> {
        Timeline::from_levels(
            self.t0,
            self.t1,
            self.names.clone(),
            std::mem::take(&mut self.threads),
        )
    }
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s.as_bytes());
}

struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if n > self.b.len() {
            return Err("cut short".into());
        }
        let (a, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(a)
    }
    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Result<u64, String> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(a))
    }
    /// A count of items of at least `min` bytes each, no more than the
    /// bytes left could hold.
    fn count(&mut self, min: usize) -> Result<usize, String> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.b.len() {
            return Err("cut short".into());
        }
        Ok(n)
    }
    fn str(&mut self) -> Result<String, String> {
        let n = self.u32()? as usize;
        let b = self.take(n)?;
        String::from_utf8(b.to_vec()).map_err(|_| "bad text".into())
    }
}

/// The trace's files (streams, manifests, profiles, process maps: what its reader
/// reads), by name, with their sizes and modification times.
pub fn fingerprint(dir: &Path) -> std::io::Result<Vec<FileStamp>> {
    let mut v = Vec::new();
    let mut binaries = std::collections::BTreeSet::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let p = e.path();
        let ext = p.extension().and_then(|x| x.to_str());
        if !matches!(ext, Some("gst" | "manifest" | "profile" | "maps")) {
            continue;
        }
        let meta = std::fs::metadata(&p)?;
        v.push(FileStamp {
            name: e.file_name().to_string_lossy().into_owned(),
            size: meta.len(),
            mtime_ns: mtime_ns(&meta),
        });
        // The binaries the processes ran: source lines come from them, so a
        // rebuilt program makes the index out of date too.
        if ext == Some("maps") {
            if let Ok(text) = std::fs::read_to_string(&p) {
                binaries.extend(
                    text.lines()
                        .filter_map(|l| l.split_whitespace().nth(5))
                        .filter(|b| b.starts_with('/'))
                        .map(str::to_string),
                );
            }
        }
    }
    // Binaries go by their absolute path (no trace file name starts with
    // '/'); one gone since is left out, as when the trace is read.
    for b in binaries {
        if let Ok(meta) = std::fs::metadata(&b) {
            v.push(FileStamp {
                name: b,
                size: meta.len(),
                mtime_ns: mtime_ns(&meta),
            });
        }
    }
    v.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(v)
}

fn mtime_ns(meta: &std::fs::Metadata) -> u64 {
    meta.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Where the index of the trace in `dir` (canonical) is looked for and
/// written: next to the trace, then in the cache directory.
pub fn places(dir: &Path) -> Vec<PathBuf> {
    let mut v = vec![dir.join(FILE_NAME)];
    if let Some(c) = cache_path(dir) {
        v.push(c);
    }
    v
}

/// The index's place in the cache directory: `$XDG_CACHE_HOME/gaspard/`
/// (else `~/.cache/gaspard/`), named by a hash of `dir`.
pub fn cache_path(dir: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    // FNV-1a: the same name from one version of gaspard to the next.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in dir.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Some(base.join("gaspard").join(format!("{h:016x}.gvi")))
}

/// What [`load`] found.
#[derive(Debug)]
pub enum Found {
    /// A valid index, and where.
    Valid(Index, PathBuf),
    /// None there.
    Absent,
    /// One that cannot be used (out of date, damaged, of another version):
    /// a line saying so.
    Invalid(String),
}

/// The index of the trace in `dir` (canonical) whose files are `now`.
pub fn load(dir: &Path, now: &[FileStamp]) -> Found {
    let mut invalid = None;
    for p in places(dir) {
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            // Absent, or not a file: looked for elsewhere.
            Err(_) => continue,
        };
        match Index::decode(&bytes, dir) {
            Ok(ix) if ix.fingerprint == now => return Found::Valid(ix, p),
            Ok(_) => {
                invalid.get_or_insert_with(|| {
                    format!(
                        "the view index {} is out of date (the trace changed): it is rebuilt",
                        p.display()
                    )
                });
            }
            Err(why) => {
                invalid.get_or_insert_with(|| {
                    format!(
                        "the view index {} cannot be used ({why}): it is rebuilt",
                        p.display()
                    )
                });
            }
        }
    }
    invalid.map_or(Found::Absent, Found::Invalid)
}

/// Writes `bytes` at `path` whole or not at all (a temporary file renamed).
fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = parent.join(format!(".{name}.tmp-{}", std::process::id()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        f.sync_all()
    });
    let done = written.and_then(|()| std::fs::rename(&tmp, path));
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// Whether saying that no index could be written has been said.
static SAID: AtomicBool = AtomicBool::new(false);

/// Writes the index of the trace in `dir` (canonical): next to it, else in
/// the cache directory; where it was written, or `None` (said once on
/// stderr). An older copy at the other place is removed.
pub fn save(dir: &Path, index: &Index) -> Option<PathBuf> {
    let bytes = index.encode(dir);
    let mut errors = Vec::new();
    let places = places(dir);
    for (i, p) in places.iter().enumerate() {
        match write_atomic(p, &bytes) {
            Ok(()) => {
                for other in places.iter().skip(i + 1) {
                    if other.is_file() {
                        let _ = std::fs::remove_file(other);
                    }
                }
                return Some(p.clone());
            }
            Err(e) => errors.push(format!("{}: {e}", p.display())),
        }
    }
    if !SAID.swap(true, Ordering::Relaxed) {
        eprintln!(
            "gaspard view: no view index written (the next opening reads the whole trace again): {}",
            errors.join("; ")
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rebuilt_binary_changes_the_fingerprint() {
        let dir = std::env::temp_dir().join(format!("gaspard-fp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("prog");
        std::fs::write(&bin, b"one").unwrap();
        std::fs::write(dir.join("h-1-0.gst"), b"stream").unwrap();
        std::fs::write(
            dir.join("h-1.maps"),
            format!(
                "55e09e95e000-55e09e95f000 r-xp 00001000 fe:00 5373993    {}\n\
                 7f384fe44000-7f384ff9a000 r-xp 00026000 fe:00 326279     /no/such/lib.so\n\
                 7f3850000000-7f3850001000 r-xp 00000000 00:00 0          [vdso]\n",
                bin.display()
            ),
        )
        .unwrap();
        let before = fingerprint(&dir).unwrap();
        let names: Vec<&str> = before.iter().map(|s| s.name.as_str()).collect();
        let prog = bin.to_string_lossy().into_owned();
        assert_eq!(names, [prog.as_str(), "h-1-0.gst", "h-1.maps"]);
        assert_eq!(stream_bytes(&before), 6);
        std::fs::write(&bin, b"rebuilt").unwrap();
        let after = fingerprint(&dir).unwrap();
        assert_ne!(before, after);
        assert_eq!(after[0].size, 7);
        std::fs::remove_dir_all(&dir).unwrap();
    }
    use crate::timeline::FINEST_BINS;

    fn sample() -> Index {
        let mut levels = Vec::new();
        let mut bins = FINEST_BINS;
        loop {
            levels.push(
                (0..bins)
                    .map(|i| [(i % 9) as u8, (i % 256) as u8])
                    .collect(),
            );
            if bins == 1 {
                break;
            }
            bins /= 2;
        }
        Index {
            fingerprint: vec![FileStamp {
                name: "h-1.0.gst".into(),
                size: 1234,
                mtime_ns: 99,
            }],
            block_size: 4096,
            t0: 10,
            t1: 1_000_000,
            names: vec!["MPI_Send".into(), "GASP_C_FUNC f(int)".into()],
            callsites: vec![
                Callsite {
                    file: Some("a.c".into()),
                    line: 3,
                    col: 1,
                },
                Callsite {
                    file: None,
                    line: 0,
                    col: 0,
                },
            ],
            threads: vec![("rank 0".into(), levels.clone()), ("rank 1".into(), levels)],
            summary: Some("{\"events\":12}".into()),
            windows: Some(vec![1, 2, 3, 0, 255]),
        }
    }

    #[test]
    fn round_trip() {
        let dir = Path::new("/some/trace");
        let ix = sample();
        let b = ix.encode(dir);
        let back = Index::decode(&b, dir).unwrap();
        assert_eq!(back.fingerprint, ix.fingerprint);
        assert_eq!(back.names, ix.names);
        assert_eq!(back.callsites.len(), 2);
        assert_eq!(back.callsites[0].file.as_deref(), Some("a.c"));
        assert_eq!(back.threads, ix.threads);
        assert_eq!(back.summary, ix.summary);
        assert_eq!(back.windows, ix.windows);
        let none = Index {
            windows: None,
            ..sample()
        };
        assert_eq!(Index::decode(&none.encode(dir), dir).unwrap().windows, None);
        assert_eq!((back.t0, back.t1, back.block_size), (10, 1_000_000, 4096));
        assert!(Index::decode(&b, Path::new("/other")).is_err());
    }

    #[test]
    fn damaged_bytes_are_refused_never_a_panic() {
        let dir = Path::new("/some/trace");
        let b = sample().encode(dir);
        // Every cut.
        for n in (0..b.len()).step_by(97).chain(0..64) {
            assert!(Index::decode(&b[..n], dir).is_err(), "cut at {n}");
        }
        // Bits flipped here and there: refused (checksum), or, in the
        // header, a clear error.
        for i in (0..b.len()).step_by(131).chain(0..24) {
            let mut c = b.clone();
            c[i] ^= 0x10;
            assert!(Index::decode(&c, dir).is_err(), "flip at {i}");
        }
        // A body with its checksum fixed up but its counts wrong.
        let mut c = b.clone();
        let at = 20 + 4 + "/some/trace".len() + 8;
        c[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32fast::hash(&c[20..]);
        c[16..20].copy_from_slice(&crc.to_le_bytes());
        assert!(Index::decode(&c, dir).is_err());
        // Another version.
        let mut c = b.clone();
        c[4] = 7;
        let e = Index::decode(&c, dir).unwrap_err();
        assert!(e.contains("version 7"), "{e}");
    }

    #[test]
    fn pyramids_of_the_wrong_shape_are_refused() {
        let dir = Path::new("/d");
        let mut ix = sample();
        ix.threads[0].1.pop();
        assert!(Index::decode(&ix.encode(dir), dir).is_err());
        let mut ix = sample();
        ix.threads[1].1[3][5][0] = 200;
        assert!(Index::decode(&ix.encode(dir), dir).is_err());
    }

    #[test]
    fn cache_names_differ_by_directory() {
        let a = cache_path(Path::new("/a/trace"));
        let b = cache_path(Path::new("/b/trace"));
        if let (Some(a), Some(b)) = (a, b) {
            assert_ne!(a, b);
            assert!(a.to_string_lossy().contains("gaspard"));
        }
    }
}
