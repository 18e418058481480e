//! OTF2 archives, for Vampir and Scalasca, written with the OTF2 library
//! through the small C layer in `csrc/otf2_shim.c`.
//!
//! Definitions: a location per thread, a location group per process, a
//! region per event name and callsite, an RMA window per shared object (MPI
//! window or symmetric allocation), a communicator per model (the MPI ranks
//! of MPI_COMM_WORLD, the OpenSHMEM PEs). Events: every START/END pair is an
//! Enter/Leave of its region (an ATOMIC event both at once); inside, blocking
//! MPI sends and receives are MpiSend/MpiRecv, non-blocking ones
//! MpiIsend/MpiIrecvRequest with MpiIsendComplete/MpiIrecv where the call
//! that completed them ends ([`crate::Completion`]), collectives and barriers
//! MpiCollectiveBegin/End, one-sided puts, gets and atomics RmaPut, RmaGet,
//! RmaAtomic, each followed by RmaOpCompleteBlocking at the operation's end;
//! MPI windows are created and destroyed (RmaWinCreate, RmaWinDestroy),
//! fenced (RmaCollectiveBegin/End) and locked (RmaRequestLock,
//! RmaAcquireLock, RmaReleaseLock).

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use gaspard_analyze::dump::event_name;
use gaspard_analyze::intervals::intervals;
use gaspard_analyze::objects::arg;
use gaspard_format::kinds::{self, Class};
use rustc_hash::FxHashMap as HashMap;

use crate::{location_name, Model, OpClass, Summary};

extern "C" {
    fn gotf2_error_name(code: c_int) -> *const c_char;
    fn gotf2_error_description(code: c_int) -> *const c_char;
    fn gotf2_open(dir: *const c_char, name: *const c_char, out: *mut *mut c_void) -> c_int;
    fn gotf2_begin_location(h: *mut c_void, location: u64) -> c_int;
    fn gotf2_end_location(h: *mut c_void, events: *mut u64) -> c_int;
    fn gotf2_enter(h: *mut c_void, t: u64, region: u32) -> c_int;
    fn gotf2_leave(h: *mut c_void, t: u64, region: u32) -> c_int;
    fn gotf2_mpi_send(h: *mut c_void, t: u64, peer: u32, comm: u32, tag: u32, len: u64) -> c_int;
    fn gotf2_mpi_recv(h: *mut c_void, t: u64, peer: u32, comm: u32, tag: u32, len: u64) -> c_int;
    fn gotf2_collective_begin(h: *mut c_void, t: u64) -> c_int;
    fn gotf2_mpi_isend(
        h: *mut c_void,
        t: u64,
        peer: u32,
        comm: u32,
        tag: u32,
        len: u64,
        request: u64,
    ) -> c_int;
    fn gotf2_mpi_isend_complete(h: *mut c_void, t: u64, request: u64) -> c_int;
    fn gotf2_mpi_irecv_request(h: *mut c_void, t: u64, request: u64) -> c_int;
    fn gotf2_mpi_irecv(
        h: *mut c_void,
        t: u64,
        peer: u32,
        comm: u32,
        tag: u32,
        len: u64,
        request: u64,
    ) -> c_int;
    fn gotf2_collective_end(
        h: *mut c_void,
        t: u64,
        op: u32,
        comm: u32,
        root: u32,
        sent: u64,
        received: u64,
    ) -> c_int;
    fn gotf2_rma_put(h: *mut c_void, t: u64, win: u32, remote: u32, bytes: u64, id: u64) -> c_int;
    fn gotf2_rma_get(h: *mut c_void, t: u64, win: u32, remote: u32, bytes: u64, id: u64) -> c_int;
    fn gotf2_rma_atomic(
        h: *mut c_void,
        t: u64,
        win: u32,
        remote: u32,
        fetch: c_int,
        bytes: u64,
        id: u64,
    ) -> c_int;
    fn gotf2_rma_complete(h: *mut c_void, t: u64, win: u32, id: u64) -> c_int;
    fn gotf2_rma_win_create(h: *mut c_void, t: u64, win: u32) -> c_int;
    fn gotf2_rma_win_destroy(h: *mut c_void, t: u64, win: u32) -> c_int;
    fn gotf2_rma_collective_begin(h: *mut c_void, t: u64) -> c_int;
    fn gotf2_rma_fence_end(h: *mut c_void, t: u64, win: u32) -> c_int;
    fn gotf2_rma_request_lock(
        h: *mut c_void,
        t: u64,
        win: u32,
        remote: u32,
        shared: c_int,
    ) -> c_int;
    fn gotf2_rma_acquire_lock(
        h: *mut c_void,
        t: u64,
        win: u32,
        remote: u32,
        shared: c_int,
    ) -> c_int;
    fn gotf2_rma_release_lock(h: *mut c_void, t: u64, win: u32, remote: u32) -> c_int;
    fn gotf2_def_clock(h: *mut c_void, length: u64) -> c_int;
    fn gotf2_def_string(h: *mut c_void, id: u32, s: *const c_char) -> c_int;
    fn gotf2_def_paradigms(h: *mut c_void, mpi: u32, shmem: u32) -> c_int;
    fn gotf2_def_region(
        h: *mut c_void,
        id: u32,
        name: u32,
        file: u32,
        line: u32,
        role: u32,
        paradigm: u32,
    ) -> c_int;
    fn gotf2_def_system_tree(h: *mut c_void, id: u32, name: u32, class: u32, parent: u32) -> c_int;
    fn gotf2_def_location_group(h: *mut c_void, id: u32, name: u32, node: u32) -> c_int;
    fn gotf2_def_location(h: *mut c_void, id: u64, name: u32, events: u64, group: u32) -> c_int;
    fn gotf2_def_group(
        h: *mut c_void,
        id: u32,
        name: u32,
        locations: c_int,
        paradigm: u32,
        n: u32,
        members: *const u64,
    ) -> c_int;
    fn gotf2_def_comm(h: *mut c_void, id: u32, name: u32, group: u32) -> c_int;
    fn gotf2_def_rma_win(h: *mut c_void, id: u32, name: u32, comm: u32) -> c_int;
    fn gotf2_close(h: *mut c_void, locations: *const u64, n: u64) -> c_int;
}

/// `OTF2_UNDEFINED_UINT32`.
const UNDEFINED: u32 = u32::MAX;

/// A global definition, written after the strings.
enum Def {
    SystemTree(u32, u32),
    LocationGroup(u32, u32),
    Location(u64, u32, u64, u32),
    Region(u32, u32, u32, u32, u32, u32),
    Group(u32, u32, c_int, u32, Vec<u64>),
    Comm(u32, u32, u32),
    RmaWin(u32, u32, u32),
}

/// An open archive; closed (and freed) by [`Archive::close`] or on drop.
struct Archive {
    h: *mut c_void,
}

fn check(code: c_int, what: &str) -> Result<()> {
    if code == 0 {
        return Ok(());
    }
    // SAFETY: OTF2 returns pointers to static strings for every code.
    let (name, desc) = unsafe {
        let n = gotf2_error_name(code);
        let d = gotf2_error_description(code);
        (
            if n.is_null() {
                String::new()
            } else {
                CStr::from_ptr(n).to_string_lossy().into_owned()
            },
            if d.is_null() {
                String::new()
            } else {
                CStr::from_ptr(d).to_string_lossy().into_owned()
            },
        )
    };
    Err(anyhow!("OTF2: {what} failed: {name} ({desc})"))
}

impl Archive {
    fn open(dir: &Path) -> Result<Archive> {
        let d = CString::new(dir.to_string_lossy().as_bytes())
            .context("the output path holds a NUL byte")?;
        let name = c"traces";
        let mut h = std::ptr::null_mut();
        // SAFETY: both strings are NUL-terminated and outlive the call; `h` is
        // written by the callee.
        check(
            unsafe { gotf2_open(d.as_ptr(), name.as_ptr(), &mut h) },
            "opening the archive",
        )?;
        Ok(Archive { h })
    }

    fn close(mut self, locations: &[u64]) -> Result<()> {
        let h = std::mem::replace(&mut self.h, std::ptr::null_mut());
        // SAFETY: `h` came from gotf2_open and is closed once (dropped as null).
        check(
            unsafe { gotf2_close(h, locations.as_ptr(), locations.len() as u64) },
            "closing the archive",
        )
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        if !self.h.is_null() {
            // SAFETY: an archive not closed by `close` (an error on the way):
            // closed and freed once here; what was written may be incomplete.
            unsafe { gotf2_close(self.h, std::ptr::null(), 0) };
        }
    }
}

/// Strings of the global definitions.
#[derive(Default)]
struct Strings {
    ids: HashMap<String, u32>,
    list: Vec<String>,
}

impl Strings {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u32;
        self.ids.insert(s.to_string(), i);
        self.list.push(s.to_string());
        i
    }
}

/// A region: name, file, line, role, paradigm (codes of the C layer).
type RegionKey = (String, u32, u32, u32, u32);

/// The role an operation's class gives its region, if it has one.
fn class_role(class: Option<OpClass>) -> Option<u32> {
    match class? {
        OpClass::Send | OpClass::Recv | OpClass::SendRecv | OpClass::Isend | OpClass::Irecv => {
            Some(3)
        }
        OpClass::Put | OpClass::Get => Some(4),
        OpClass::Atomic { .. } => Some(6),
        OpClass::Collective(0) => Some(2),
        OpClass::Collective(_) => Some(5),
    }
}

fn role(name: &str, class: Option<OpClass>) -> u32 {
    if let Some(r) = class_role(class) {
        return r;
    }
    let Some(k) = kinds::kind_by_name(name.split(' ').next().unwrap_or(name)) else {
        return 0;
    };
    match k.class {
        Class::Function => 1,
        Class::Memory => 7,
        Class::Sync if k.name.contains("BARRIER") => 2,
        Class::Sync if k.name.contains("LOCK") || k.name.contains("CRITICAL") => 10,
        Class::Work if k.name.contains("PARALLEL") => 8,
        Class::Work => 9,
        _ => 0,
    }
}

fn paradigm(name: &str) -> u32 {
    if name.starts_with("GASP_MPI_") {
        1
    } else if name.starts_with("GASP_SHMEM_") {
        2
    } else if name.starts_with("GASP_OMP_") {
        3
    } else if name.starts_with("GASP_C_FUNC") {
        4
    } else {
        0
    }
}

/// Writes the OTF2 archive `out` (a directory holding `traces.otf2`).
pub fn write(m: &Model, out: &Path, progress: &indicatif::ProgressBar) -> Result<Summary> {
    let models: Vec<&str> = m.ranks.keys().copied().collect();
    let mut w = Writer::open(out, &models)?;
    w.write_part(m, progress)?;
    w.finish(&m.windows, &m.ranks)
}

/// What a location's definition needs once its events are written.
struct LocationDef {
    process: String,
    rank: Option<(&'static str, usize)>,
    name: String,
    events: u64,
}

/// An OTF2 archive being written: locations one after another (of the
/// whole trace, or of one process after another), then the definitions.
pub(crate) struct Writer {
    out: std::path::PathBuf,
    archive: Archive,
    strings: Strings,
    regions: HashMap<RegionKey, u32>,
    region_list: Vec<RegionKey>,
    /// A communicator per model present, numbered from 0 (OTF2 wants
    /// definitions numbered densely, in order).
    comms: Vec<(&'static str, u32, &'static str)>,
    counts: [u64; 8], // enter, leave, send, recv, coll, put, get, atomic
    locations: Vec<LocationDef>,
    /// The latest event's time.
    length: u64,
    /// Operations of the parts written before (their numbers go on).
    ops_before: usize,
}

impl Writer {
    /// Opens the archive `out`, for a trace whose ranks are of `models`.
    pub(crate) fn open(out: &Path, models: &[&str]) -> Result<Writer> {
        std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
        let archive = Archive::open(out)?;
        let comms = [
            ("MPI", 1u32, "MPI_COMM_WORLD"),
            ("SHMEM", 2, "OpenSHMEM PEs"),
        ]
        .into_iter()
        .filter(|(model, _, _)| models.contains(model))
        .collect();
        Ok(Writer {
            out: out.to_path_buf(),
            archive,
            strings: Strings::default(),
            regions: HashMap::default(),
            region_list: Vec::new(),
            comms,
            counts: [0; 8],
            locations: Vec::new(),
            length: 0,
            ops_before: 0,
        })
    }

    fn comm_of(&self, model: &str) -> u32 {
        self.comms
            .iter()
            .position(|c| c.0 == model)
            .map_or(UNDEFINED, |i| i as u32)
    }

    /// Writes a location per stream of `m`'s trace.
    pub(crate) fn write_part(
        &mut self,
        m: &Model,
        progress: &indicatif::ProgressBar,
    ) -> Result<()> {
        let t = m.trace;
        let h = self.archive.h;
        let ops_before = self.ops_before;
        for (si, s) in t.streams.iter().enumerate() {
            // Per event (by index): the START an END closes, whether a START is
            // closed, and a START's region (tables: a map per event was most of
            // the export's time).
            const NONE: u32 = u32::MAX;
            let mut start_of_end = vec![NONE; s.events.len()];
            let mut starts = vec![false; s.events.len()];
            for iv in intervals(s) {
                start_of_end[iv.end_event as usize] = iv.start_event;
                starts[iv.start_event as usize] = true;
            }
            let mut region_at = vec![NONE; s.events.len()];
            // The region of each (kind, user event, function, callsite, role
            // of its operation's class) met: its name and key made once,
            // not for every event.
            let mut region_of: HashMap<(u16, Option<u32>, usize, u32, u32), u32> =
                HashMap::default();
            // SAFETY: `h` is the open archive; the location number is ours.
            check(
                unsafe { gotf2_begin_location(h, self.locations.len() as u64) },
                "opening a location",
            )?;
            let mut last = 0u64;
            for (i, e) in s.events.iter().enumerate() {
                let matched_end = (start_of_end[i] != NONE).then_some(start_of_end[i] as usize);
                if e.phase == 0 && !starts[i] {
                    continue;
                }
                if e.phase == 1 && matched_end.is_none() {
                    continue;
                }
                let time = e.t_ns.max(last);
                last = time;
                let op_index = match (e.phase, matched_end) {
                    (1, Some(st)) => m.op_at[si].get(&st).copied(),
                    _ => m.op_at[si].get(&i).copied(),
                };
                let op = op_index.map(|o| &m.ops[o]);
                let region = match (e.phase, matched_end) {
                    // A START whose region is not set yet gives region 0.
                    (1, Some(st)) => match region_at[st] {
                        NONE => 0,
                        r => r,
                    },
                    _ => {
                        let (kind, user, text) = gaspard_analyze::dump::event_key(t, e);
                        let shape = (
                            kind,
                            user,
                            text,
                            e.callsite,
                            class_role(op.and_then(|o| o.class)).unwrap_or(u32::MAX),
                        );
                        let r = match region_of.get(&shape) {
                            Some(&r) => r,
                            None => {
                                let name = event_name(t, e);
                                let site = t.callsites.get(e.callsite as usize);
                                let file = site
                                    .and_then(|c| c.file.as_deref())
                                    .map(|f| self.strings.id(f))
                                    .unwrap_or(UNDEFINED);
                                let line = site.map_or(0, |c| c.line);
                                let key = (
                                    name.clone(),
                                    file,
                                    line,
                                    role(&name, op.and_then(|o| o.class)),
                                    paradigm(&name),
                                );
                                let next = self.region_list.len() as u32;
                                let r = *self.regions.entry(key.clone()).or_insert_with(|| {
                                    self.region_list.push(key);
                                    next
                                });
                                region_of.insert(shape, r);
                                r
                            }
                        };
                        if e.phase == 0 {
                            region_at[i] = r;
                        }
                        r
                    }
                };
                // SAFETY (every call below): `h` is the open archive with this
                // location's event writer open.
                if e.phase != 1 {
                    check(unsafe { gotf2_enter(h, time, region) }, "writing Enter")?;
                    self.counts[0] += 1;
                }
                if let Some(op) = op.filter(|_| e.phase == 0) {
                    let comm = self.comm_of(op.model);
                    let win = op.window.unwrap_or(0) as u32;
                    let peer = op.peer.map_or(UNDEFINED, |p| p as u32);
                    let id = op_index.map_or(0, |o| o + ops_before) as u64;
                    match op.class {
                        Some(OpClass::Send | OpClass::SendRecv) => {
                            let tag = op.tag.unwrap_or(0) as u32;
                            check(
                                unsafe { gotf2_mpi_send(h, time, peer, comm, tag, op.bytes) },
                                "writing MpiSend",
                            )?;
                            self.counts[2] += 1;
                        }
                        Some(OpClass::Isend) => {
                            let tag = op.tag.unwrap_or(0) as u32;
                            check(
                                unsafe { gotf2_mpi_isend(h, time, peer, comm, tag, op.bytes, id) },
                                "writing MpiIsend",
                            )?;
                            self.counts[2] += 1;
                        }
                        Some(OpClass::Irecv) if op.completion.is_some() => {
                            check(
                                unsafe { gotf2_mpi_irecv_request(h, time, id) },
                                "writing MpiIrecvRequest",
                            )?;
                        }
                        Some(OpClass::Collective(_)) => {
                            check(
                                unsafe { gotf2_collective_begin(h, time) },
                                "writing MpiCollectiveBegin",
                            )?;
                        }
                        Some(OpClass::Put) => {
                            check(
                                unsafe { gotf2_rma_put(h, time, win, peer, op.bytes, id) },
                                "writing RmaPut",
                            )?;
                            self.counts[5] += 1;
                        }
                        Some(OpClass::Get) => {
                            check(
                                unsafe { gotf2_rma_get(h, time, win, peer, op.bytes, id) },
                                "writing RmaGet",
                            )?;
                            self.counts[6] += 1;
                        }
                        Some(OpClass::Atomic { fetch }) => {
                            check(
                                unsafe {
                                    gotf2_rma_atomic(
                                        h,
                                        time,
                                        win,
                                        peer,
                                        fetch as c_int,
                                        op.bytes,
                                        id,
                                    )
                                },
                                "writing RmaAtomic",
                            )?;
                            self.counts[7] += 1;
                        }
                        _ => {}
                    }
                }
                if let Some(op) = op.filter(|_| e.phase == 1) {
                    let comm = self.comm_of(op.model);
                    let tag = op.tag.unwrap_or(0) as u32;
                    let id = op_index.map_or(0, |o| o + ops_before) as u64;
                    match op.class {
                        Some(OpClass::Recv) => {
                            let peer = op.peer.map_or(UNDEFINED, |p| p as u32);
                            check(
                                unsafe { gotf2_mpi_recv(h, time, peer, comm, tag, op.bytes) },
                                "writing MpiRecv",
                            )?;
                            self.counts[3] += 1;
                        }
                        Some(OpClass::SendRecv) => {
                            if let Some((src, bytes)) = op.recv {
                                check(
                                    unsafe {
                                        gotf2_mpi_recv(h, time, src as u32, comm, tag, bytes)
                                    },
                                    "writing MpiRecv",
                                )?;
                                self.counts[3] += 1;
                            }
                        }
                        Some(OpClass::Collective(c)) => {
                            let root = op.root.map_or(UNDEFINED, |r| r as u32);
                            let root = if matches!(c, 1 | 2 | 3 | 7) {
                                root
                            } else {
                                UNDEFINED
                            };
                            check(
                                unsafe {
                                    gotf2_collective_end(h, time, c, comm, root, op.bytes, op.bytes)
                                },
                                "writing MpiCollectiveEnd",
                            )?;
                            self.counts[4] += 1;
                        }
                        Some(c) if c.is_rma() => {
                            let win = op.window.unwrap_or(0) as u32;
                            check(
                                unsafe { gotf2_rma_complete(h, time, win, id) },
                                "writing RmaOpCompleteBlocking",
                            )?;
                        }
                        _ => {}
                    }
                }
                // MPI windows: made, freed, fenced, locked.
                if let Some(kname) = kinds::kind(e.kind)
                    .map(|k| k.name)
                    .filter(|n| n.starts_with("GASP_MPI_WIN_"))
                {
                    let win = arg(s, e, "win")
                        .and_then(|w| m.win_index.get(&(s.process.clone(), w)))
                        .map(|&w| w as u32);
                    if let Some(win) = win {
                        let target = arg(s, e, "target").map_or(UNDEFINED, |v| v as u32);
                        // MPI_LOCK_SHARED (Open MPI's value).
                        let shared = c_int::from(arg(s, e, "lock_type") == Some(2));
                        let written = match (kname, e.phase) {
                            ("GASP_MPI_WIN_ALLOCATE" | "GASP_MPI_WIN_CREATE", 1) => Some((
                                unsafe { gotf2_rma_win_create(h, time, win) },
                                "writing RmaWinCreate",
                            )),
                            ("GASP_MPI_WIN_FREE", 0) => Some((
                                unsafe { gotf2_rma_win_destroy(h, time, win) },
                                "writing RmaWinDestroy",
                            )),
                            ("GASP_MPI_WIN_FENCE", 0) => Some((
                                unsafe { gotf2_rma_collective_begin(h, time) },
                                "writing RmaCollectiveBegin",
                            )),
                            ("GASP_MPI_WIN_FENCE", 1) => Some((
                                unsafe { gotf2_rma_fence_end(h, time, win) },
                                "writing RmaCollectiveEnd",
                            )),
                            ("GASP_MPI_WIN_LOCK", 0) => Some((
                                unsafe { gotf2_rma_request_lock(h, time, win, target, shared) },
                                "writing RmaRequestLock",
                            )),
                            ("GASP_MPI_WIN_LOCK", 1) => Some((
                                unsafe { gotf2_rma_acquire_lock(h, time, win, target, shared) },
                                "writing RmaAcquireLock",
                            )),
                            ("GASP_MPI_WIN_UNLOCK", 1) => Some((
                                unsafe { gotf2_rma_release_lock(h, time, win, target) },
                                "writing RmaReleaseLock",
                            )),
                            _ => None,
                        };
                        if let Some((code, what)) = written {
                            check(code, what)?;
                        }
                    }
                }
                // Non-blocking sends and receives this call completed.
                if e.phase == 1 {
                    for &oi in m.completed_at[si].get(&i).into_iter().flatten() {
                        let op = &m.ops[oi];
                        let Some(c) = op.completion else {
                            continue;
                        };
                        if op.class == Some(OpClass::Isend) {
                            check(
                                unsafe {
                                    gotf2_mpi_isend_complete(h, time, (oi + ops_before) as u64)
                                },
                                "writing MpiIsendComplete",
                            )?;
                        } else {
                            let source = c.source.map_or(UNDEFINED, |p| p as u32);
                            let tag = c.tag.unwrap_or(0) as u32;
                            check(
                                unsafe {
                                    gotf2_mpi_irecv(
                                        h,
                                        time,
                                        source,
                                        self.comm_of(op.model),
                                        tag,
                                        op.bytes,
                                        (oi + ops_before) as u64,
                                    )
                                },
                                "writing MpiIrecv",
                            )?;
                            self.counts[3] += 1;
                        }
                    }
                }
                if e.phase != 0 {
                    check(unsafe { gotf2_leave(h, time, region) }, "writing Leave")?;
                    self.counts[1] += 1;
                }
            }
            let mut n = 0u64;
            // SAFETY: closes the writer opened above; `n` is written by the callee.
            check(
                unsafe { gotf2_end_location(h, &mut n) },
                "closing a location",
            )?;
            self.locations.push(LocationDef {
                process: s.process.clone(),
                rank: m.stream_rank[si],
                name: location_name(m, si),
                events: n,
            });
            if let Some(e) = s.events.last() {
                self.length = self.length.max(e.t_ns);
            }
            progress.inc(s.events.len() as u64);
        }
        self.ops_before += m.ops.len();
        Ok(())
    }

    /// Writes the definitions (of the windows `windows` and the ranks
    /// `ranks`: per model, the location of each rank's first thread) and
    /// closes the archive.
    pub(crate) fn finish(
        mut self,
        windows: &[crate::Window],
        ranks: &HashMap<&'static str, Vec<Option<usize>>>,
    ) -> Result<Summary> {
        let (h, length, out) = (self.archive.h, self.length, self.out.clone());
        let strings = &mut self.strings;

        // Global definitions: every string first (readers resolve names as
        // they go), then the definitions that refer to them.
        let mut defs: Vec<Def> = Vec::new();
        let (mpi, shmem) = (strings.id("MPI"), strings.id("OpenSHMEM"));
        let (root, machine) = (strings.id("gaspard trace"), strings.id("machine"));
        defs.push(Def::SystemTree(root, machine));
        // A location group per process that has threads, numbered densely in
        // the order of the streams.
        let mut process_index: HashMap<&str, u32> = HashMap::default();
        for s in &self.locations {
            let next = process_index.len() as u32;
            process_index.entry(s.process.as_str()).or_insert(next);
        }
        let mut groups_done = vec![false; process_index.len()];
        for s in &self.locations {
            let Some(&g) = process_index.get(s.process.as_str()) else {
                continue;
            };
            if !std::mem::replace(&mut groups_done[g as usize], true) {
                let name = crate::process_name(&s.process, s.rank);
                defs.push(Def::LocationGroup(g, strings.id(&name)));
            }
        }
        let mut locations = Vec::new();
        for (si, s) in self.locations.iter().enumerate() {
            let g = process_index
                .get(s.process.as_str())
                .copied()
                .unwrap_or(UNDEFINED);
            let n = strings.id(&s.name);
            defs.push(Def::Location(si as u64, n, s.events, g));
            locations.push(si as u64);
        }
        for (id, (name, file, line, role, paradigm)) in self.region_list.iter().enumerate() {
            let n = strings.id(name);
            defs.push(Def::Region(id as u32, n, *file, *line, *role, *paradigm));
        }
        for (comm, &(model, paradigm, label)) in self.comms.iter().enumerate() {
            let comm = comm as u32;
            let Some(ranks) = ranks.get(model) else {
                continue;
            };
            let members: Vec<u64> = ranks
                .iter()
                .map(|r| r.map_or(u64::MAX, |s| s as u64))
                .collect();
            let indices: Vec<u64> = (0..ranks.len() as u64).collect();
            let ln = strings.id(&format!("{label} locations"));
            let gn = strings.id(label);
            defs.push(Def::Group(2 * comm, ln, 1, paradigm, members));
            defs.push(Def::Group(2 * comm + 1, gn, 0, paradigm, indices));
            defs.push(Def::Comm(comm, gn, 2 * comm + 1));
        }
        for (id, w) in windows.iter().enumerate() {
            let n = strings.id(&w.name);
            let comm = self
                .comms
                .iter()
                .position(|c| c.0 == w.model)
                .map_or(UNDEFINED, |i| i as u32);
            defs.push(Def::RmaWin(id as u32, n, comm));
        }
        // SAFETY (every definition call): `h` is the open archive; pointers and
        // lengths come from live vectors and strings.
        check(unsafe { gotf2_def_clock(h, length) }, "writing the clock")?;
        for (id, s) in strings.list.iter().enumerate() {
            let c = CString::new(s.replace('\0', "?")).unwrap_or_default();
            check(
                unsafe { gotf2_def_string(h, id as u32, c.as_ptr()) },
                "writing a string",
            )?;
        }
        check(
            unsafe { gotf2_def_paradigms(h, mpi, shmem) },
            "writing paradigms",
        )?;
        for d in &defs {
            let (code, what) = match d {
                Def::SystemTree(n, c) => (
                    unsafe { gotf2_def_system_tree(h, 0, *n, *c, UNDEFINED) },
                    "writing the system tree",
                ),
                Def::LocationGroup(g, n) => (
                    unsafe { gotf2_def_location_group(h, *g, *n, 0) },
                    "writing a location group",
                ),
                Def::Location(id, n, ev, g) => (
                    unsafe { gotf2_def_location(h, *id, *n, *ev, *g) },
                    "writing a location",
                ),
                Def::Region(id, n, file, line, role, paradigm) => (
                    unsafe { gotf2_def_region(h, *id, *n, *file, *line, *role, *paradigm) },
                    "writing a region",
                ),
                Def::Group(id, n, locs, paradigm, members) => (
                    unsafe {
                        gotf2_def_group(
                            h,
                            *id,
                            *n,
                            *locs,
                            *paradigm,
                            members.len() as u32,
                            members.as_ptr(),
                        )
                    },
                    "writing a group",
                ),
                Def::Comm(id, n, g) => (
                    unsafe { gotf2_def_comm(h, *id, *n, *g) },
                    "writing a communicator",
                ),
                Def::RmaWin(id, n, c) => (
                    unsafe { gotf2_def_rma_win(h, *id, *n, *c) },
                    "writing an RMA window",
                ),
            };
            check(code, what)?;
        }
        let counts = self.counts;
        let regions = self.region_list.len();
        self.archive.close(&locations)?;
        let total: u64 = self.locations.iter().map(|l| l.events).sum();
        Ok(Summary {
            lines: vec![
                format!(
                    "{}: {} locations, {} regions, {} RMA windows, {total} events",
                    out.join("traces.otf2").display(),
                    locations.len(),
                    regions,
                    windows.len()
                ),
                format!(
                    "Enter {} Leave {} sends {} receives {} collectives {} RmaPut {} RmaGet {} RmaAtomic {}",
                    counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], counts[7]
                ),
            ],
        })
    }
}
