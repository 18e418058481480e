//! What the tests of traces written here share.

use std::path::{Path, PathBuf};

use gaspard_format::manifest::{Manifest, StreamEntry};

/// A fresh directory for test `name` of group `group`, removed when the
/// guard is dropped, unless the test failed (its traces are then left to be
/// looked at).
pub fn tmpdir(group: &str, name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("gaspard-{group}-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// A test's directory ([`tmpdir`]).
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Writes the manifest of process `pid` of host `h`, complete, with its
/// stream files `files` (stream `i` in `files[i]`) and `events` in all.
pub fn write_manifest(dir: &Path, pid: u32, files: &[String], events: u64) {
    let m = Manifest {
        host: "h".into(),
        pid,
        clock: "monotonic".into(),
        clock_refs: vec![(1000, 1000)],
        pts_bytes: 16,
        streams: files
            .iter()
            .zip(0u32..)
            .map(|(file, id)| StreamEntry {
                id,
                file: file.clone(),
                ..Default::default()
            })
            .collect(),
        status: "complete".into(),
        events,
        ..Default::default()
    };
    std::fs::write(dir.join(format!("h-{pid}.manifest")), m.to_text()).unwrap();
}

/// Fails unless one of the problems of `t` contains one of `any`.
pub fn says(t: &gaspard_analyze::trace::Trace, any: &[&str]) {
    assert!(
        t.problems.iter().any(|p| any.iter().any(|w| p.contains(w))),
        "no problem says any of {any:?}: {:?}",
        t.problems
    );
}

/// The raw words of a GET's START (`start`) or END at `ts`, from `line` of
/// the file at `file`, of `nbytes` bytes.
pub fn get(ts: u64, start: bool, line: u32, file: u64, nbytes: u64) -> Vec<u64> {
    use gaspard_format::raw::{RawHeader, PHASE_END, PHASE_START};
    RawHeader {
        ts,
        kind: gaspard_format::kinds::UPC_GET,
        phase: if start { PHASE_START } else { PHASE_END },
        flags: 0,
        nwords: 5,
        line,
        col: 0,
        file,
    }
    .record(&[1, 0x10, 0, 0, nbytes])
}
