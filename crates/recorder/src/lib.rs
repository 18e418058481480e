//! gaspard's recorder: the slow paths behind the C hot path of
//! `csrc/gaspard_record.h`.
//!
//! Each context (one per thread and programming model) writes raw records
//! into its own buffer with no lock. A full buffer is pushed, lock-free, onto
//! a queue that one flusher thread drains: it encodes the records into
//! checksummed chunks and appends them to the context's stream file. At exit
//! and on fatal signals every partly filled buffer is sealed and drained the
//! same way, so what was recorded reaches the disk.
#![warn(missing_docs, missing_debug_implementations)]
#![deny(unsafe_op_in_unsafe_fn)]

mod aggregate;
mod clock;
mod filter;
mod flusher;
mod process;
mod signals;

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

pub use clock::{monotonic_ns, now_ticks, reference_ns, ticks_per_us};
pub use process::{create_user_event, options_from_args, Options, UserEventRange};

/// The context the C hot path writes through; mirrors `gaspard_ctx`.
#[repr(C)]
#[derive(Debug)]
pub struct Ctx {
    cur: *mut u8,
    end: *mut u8,
    owner: *const c_void,
    on: u32,
    model: u32,
    rs: *mut c_void,
    unknown_tags: u64,
    enc: *mut c_void,
    filtered: u64,
}

/// The leading fields of `gaspard_enc`, as Rust reads them.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct EncStats {
    events: u32,
    base_ts: u64,
    last_ts: u64,
}

/// Number of context slots (`GASPARD_MAX_CONTEXTS`).
pub const MAX_CONTEXTS: usize = 4096;

extern "C" {
    static mut gaspard_contexts: [Ctx; MAX_CONTEXTS];
    static mut gaspard_clock_is_tsc: libc::c_int;
    fn gaspard_tls_marker_addr() -> *const c_void;
    fn gaspard_clock_now() -> u64;
    fn gaspard_pts_bytes_value() -> u32;
    fn gaspard_enc_new() -> *mut c_void;
    fn gaspard_enc_reset(e: *mut c_void);
    fn gaspard_enc_stats(e: *const c_void, events: *mut u32, base_ts: *mut u64, last_ts: *mut u64);
    fn gaspard_emit_plain(
        c: *mut Ctx,
        kind: u32,
        phase: u32,
        args: *const u64,
        n: u32,
        checked: i32,
    );
}

/// The address of the calling thread's TLS marker (the owner of its contexts).
fn gaspard_tls_marker_addr_safe() -> *const c_void {
    // SAFETY: a plain C function returning an address.
    unsafe { gaspard_tls_marker_addr() }
}

/// The chunk bookkeeping of a context's encoder.
fn enc_stats(e: *mut c_void) -> EncStats {
    let mut s = EncStats::default();
    if !e.is_null() {
        // SAFETY: `e` is an encoder made by gaspard_enc_new; the outputs are ours.
        unsafe { gaspard_enc_stats(e, &mut s.events, &mut s.base_ts, &mut s.last_ts) };
    }
    s
}

/// Rust-side state of one context.
#[derive(Debug)]
struct CtxState {
    /// 0 free, 1 held by the owner's slow path or by a sealing pass.
    lock: AtomicU32,
    buf: *mut flusher::Buffer,
    stream: u32,
    dropped: u64,
    drop_first: u64,
    drop_last: u64,
    /// The last value given to `gasp_control`.
    control: i32,
}

impl CtxState {
    fn try_lock(&self) -> bool {
        self.lock
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
    fn unlock(&self) {
        self.lock.store(0, Ordering::Release);
    }
}

fn ctx_slot(i: usize) -> *mut Ctx {
    // SAFETY: `i` is below MAX_CONTEXTS at every call site; only the address is taken.
    unsafe {
        std::ptr::addr_of_mut!(gaspard_contexts)
            .cast::<Ctx>()
            .add(i)
    }
}

fn ctx_index(c: *const Ctx) -> Option<usize> {
    let base = ctx_slot(0) as usize;
    let off = (c as usize).wrapping_sub(base);
    let size = std::mem::size_of::<Ctx>();
    (off < MAX_CONTEXTS * size && off.is_multiple_of(size)).then_some(off / size)
}

thread_local! {
    /// This thread's contexts, by model.
    static MINE: RefCell<Vec<(u32, usize)>> = const { RefCell::new(Vec::new()) };
}

/// The context of the calling thread for `model`, created on first use.
/// Returns null when no more contexts can be made.
pub fn context_for(model: u32) -> *mut Ctx {
    if let Some(i) = MINE
        .try_with(|m| m.borrow().iter().find(|(md, _)| *md == model).map(|x| x.1))
        .ok()
        .flatten()
    {
        return ctx_slot(i);
    }
    let Some(proc) = process::get() else {
        return std::ptr::null_mut();
    };
    let Some(i) = proc.new_context(model) else {
        return std::ptr::null_mut();
    };
    let _ = MINE.try_with(|m| m.borrow_mut().push((model, i)));
    let c = ctx_slot(i);
    record(
        c,
        gaspard_format::kinds::GASPARD_INIT,
        gaspard_format::raw::PHASE_ATOMIC,
        &[u64::from(model)],
    );
    c
}

/// Initialises the process side (output directory, flusher, handlers) once.
pub fn init_process(opts: Options) -> bool {
    process::init(opts).is_some()
}

/// Records one event from Rust (never on a per-event hot path of C adapters).
pub fn record(c: *mut Ctx, kind: u16, phase: u8, args: &[u64]) {
    let Some(i) = ctx_index(c) else { return };
    if args.len() > 16 {
        return;
    }
    // SAFETY: slot `i` is this thread's context; the C encoder reserves its own room.
    unsafe {
        gaspard_emit_plain(
            ctx_slot(i),
            u32::from(kind),
            u32::from(phase),
            args.as_ptr(),
            args.len() as u32,
            1,
        )
    };
}

/// Measurement control: sets a context's switch to `value != 0` and returns
/// the last value given (1 before any call), as `gasp_control` must.
/// Records the switch so that analyses know what was not measured.
pub fn set_measurement(c: *mut Ctx, value: i32) -> i32 {
    let Some(i) = ctx_index(c) else { return 1 };
    // SAFETY: slot `i` of `gaspard_contexts`, owned by this thread.
    let ctx = unsafe { &mut *ctx_slot(i) };
    let on = value != 0;
    let was = ctx.on != 0;
    let st = ctx.rs.cast::<CtxState>();
    let previous = if st.is_null() {
        i32::from(was)
    } else {
        // SAFETY: the CtxState of this slot lives as long as the process.
        unsafe { std::mem::replace(&mut (*st).control, value) }
    };
    if was && !on {
        record(
            c,
            gaspard_format::kinds::GASPARD_MEASUREMENT,
            gaspard_format::raw::PHASE_ATOMIC,
            &[0],
        );
        ctx.on = 0;
    } else if !was && on {
        ctx.on = 1;
        record(
            c,
            gaspard_format::kinds::GASPARD_MEASUREMENT,
            gaspard_format::raw::PHASE_ATOMIC,
            &[1],
        );
    }
    previous
}

/// Flushes everything recorded so far and writes the manifest as complete.
/// Called at exit; safe to call more than once.
pub fn finish() {
    if let Some(p) = process::started() {
        p.finish();
    }
}

/// The slow path of `gaspard_reserve`: hands the full buffer to the flusher
/// and installs a fresh one. Returns null when the event must be dropped
/// (counted, with its time, in the trace).
#[no_mangle]
pub extern "C" fn gaspard_refill(c: *mut Ctx) -> *mut u8 {
    std::panic::catch_unwind(|| match process::get() {
        Some(p) => p.refill(c),
        None => std::ptr::null_mut(),
    })
    .unwrap_or(std::ptr::null_mut())
}

/// The clock this process's times come from, for the adapters' clock
/// synchronization: writes it NUL-terminated into `out` (at most `cap`
/// bytes) and returns its length; 0 (and an empty string) when this
/// process measures its offset from the reference process's clock whatever
/// that one's (see `clock::domain`).
///
/// # Safety
/// `out` points to `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn gaspard_clock_domain(out: *mut std::ffi::c_char, cap: usize) -> usize {
    if out.is_null() || cap == 0 {
        return 0;
    }
    let id = std::panic::catch_unwind(clock::domain).ok().flatten();
    let id = id.as_deref().unwrap_or("").as_bytes();
    let n = if id.len() < cap { id.len() } else { 0 };
    // SAFETY: the caller gives `cap` writable bytes; n < cap.
    unsafe {
        std::ptr::copy_nonoverlapping(id.as_ptr(), out.cast::<u8>(), n);
        *out.add(n) = 0;
    }
    n
}

/// The throttling of instrumented functions: writes the call count and the
/// mean duration (in clock ticks and in microseconds) below which a function
/// stops being recorded, and returns 1; returns 0 when throttling is off.
///
/// # Safety
/// `calls`, `ticks` and `us` point to writable `u64`s.
#[no_mangle]
pub unsafe extern "C" fn gaspard_throttle(calls: *mut u64, ticks: *mut u64, us: *mut u64) -> i32 {
    std::panic::catch_unwind(|| {
        let Some((n, us_limit)) = process::get().and_then(|p| p.throttle) else {
            return 0;
        };
        let t = (us_limit as f64 * clock::ticks_per_us()).max(1.0) as u64;
        // SAFETY: the C caller passes writable pointers.
        unsafe {
            *calls = n;
            *ticks = t;
            *us = us_limit;
        }
        1
    })
    .unwrap_or(0)
}

/// The throttling limits without the clock's rate: writes the call count
/// and the mean duration in microseconds below which a function or call
/// site stops being recorded, and returns 1; returns 0 when throttling is
/// off. (The limit in ticks, [`gaspard_throttle`], is asked when first
/// needed, once the clock's rate is known without a wait.)
///
/// # Safety
/// `calls` and `us` point to writable `u64`s.
#[no_mangle]
pub unsafe extern "C" fn gaspard_throttle_limits(calls: *mut u64, us: *mut u64) -> i32 {
    std::panic::catch_unwind(|| {
        let Some((n, us_limit)) = process::get().and_then(|p| p.throttle) else {
            return 0;
        };
        // SAFETY: the C caller passes writable pointers.
        unsafe {
            *calls = n;
            *us = us_limit;
        }
        1
    })
    .unwrap_or(0)
}

/// Whether the hook calls of throttled C functions may be patched out of the
/// code, and throttled allocation call sites patched to call the C library
/// directly (`GASPARD_THROTTLE_PATCH`): 1 yes, 0 no.
#[no_mangle]
pub extern "C" fn gaspard_throttle_patch() -> i32 {
    std::panic::catch_unwind(|| process::get().is_some_and(|p| p.throttle_patch) as i32)
        .unwrap_or(0)
}

/// Adds `msg` (a NUL-terminated string) to the process's manifest notes.
///
/// # Safety
/// `msg` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn gaspard_note(msg: *const std::ffi::c_char) {
    if msg.is_null() {
        return;
    }
    // SAFETY: the C caller passes a NUL-terminated string.
    let s = unsafe { std::ffi::CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    let _ = std::panic::catch_unwind(|| {
        if let Some(p) = process::get() {
            p.note(s);
        }
    });
}

/// A function that writes lines of notes (each ending in a newline) into
/// `out`, at most `cap` bytes, and returns the bytes written: counters kept
/// outside the recorder (calls left out by throttling), read each time the
/// manifest is written, at exit and after a crash included.
pub type NoteSource = unsafe extern "C" fn(out: *mut std::ffi::c_char, cap: usize) -> usize;

static NOTE_SOURCES: [std::sync::atomic::AtomicUsize; 4] =
    [const { std::sync::atomic::AtomicUsize::new(0) }; 4];

/// Registers a [`NoteSource`] (once per function; at most four).
#[no_mangle]
pub extern "C" fn gaspard_note_source(f: Option<NoteSource>) {
    let Some(f) = f else { return };
    let v = f as usize;
    for slot in &NOTE_SOURCES {
        match slot.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(cur) if cur == v => return,
            Err(_) => {}
        }
    }
}

/// The notes of the registered sources, now.
pub(crate) fn source_notes() -> Vec<String> {
    let mut notes = Vec::new();
    for slot in &NOTE_SOURCES {
        let v = slot.load(Ordering::Acquire);
        if v == 0 {
            continue;
        }
        // SAFETY: only NoteSource functions are stored in the slots.
        let f: NoteSource = unsafe { std::mem::transmute::<usize, NoteSource>(v) };
        let mut buf = vec![0u8; 64 * 1024];
        // SAFETY: the source writes at most `cap` bytes into our buffer.
        let n = unsafe { f(buf.as_mut_ptr().cast(), buf.len()) }.min(buf.len());
        notes.extend(
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
    }
    notes
}

/// Writes the definition of user event `id` at `p`, at most `cap` bytes.
///
/// # Safety
/// `p` points to at least `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn gaspard_user_definition(id: u64, p: *mut u8, cap: usize) -> usize {
    std::panic::catch_unwind(|| {
        let mut out = Vec::new();
        let def = process::get().and_then(|pr| pr.user_def(id));
        gaspard_format::codec::write_user_definition(
            &mut out,
            &def.unwrap_or_else(|| gaspard_format::codec::UserDef {
                id,
                name: format!("user_event_{id}"),
                desc: None,
                unreadable: None,
            }),
        );
        if out.len() > cap {
            return 0;
        }
        // SAFETY: the C caller guarantees `cap` writable bytes at `p`.
        unsafe { std::ptr::copy_nonoverlapping(out.as_ptr(), p, out.len()) };
        out.len()
    })
    .unwrap_or(0)
}

/// The hot path met a context that is null, foreign, or another thread's:
/// answer with the calling thread's own context for the same model.
#[no_mangle]
pub extern "C" fn gaspard_context_for_thread(c: *mut Ctx) -> *mut Ctx {
    std::panic::catch_unwind(|| {
        let model = match ctx_index(c) {
            // SAFETY: a slot of the pool; `model` is written once before the slot is published.
            Some(i) => unsafe { (*ctx_slot(i)).model },
            None => {
                if let Some(p) = process::get() {
                    p.note_bad_context(c as usize);
                }
                0
            }
        };
        context_for(model)
    })
    .unwrap_or(std::ptr::null_mut())
}
