//! The tool side of the GASP 1.4 interface: `libgaspard.so` / `libgaspard.a`.
//!
//! The varargs entry points (`gasp_event_notify`, `gasp_event_notifyVA`,
//! `pupc_event_*`) are C, in `csrc/gasp_shim.c`; this file holds the rest.
//! No panic crosses into C: every entry point catches unwinding.
#![deny(unsafe_op_in_unsafe_fn)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::panic::catch_unwind;

use gaspard_recorder::{self as rec, Ctx, UserEventRange};

extern "C" {
    static gaspard_userevt_start: c_uint;
    static gaspard_userevt_end: c_uint;
    fn gaspard_set_user_schema(id: c_uint, schema: *const u8);
}

/// `GASP_MODEL_UPC`.
const MODEL_UPC: u32 = 0;

/// Strips `--gaspard-*` options from argv (in place) and starts the process side.
///
/// # Safety
/// `argc`/`argv` are null or the program's own.
unsafe fn init_from_args(argc: *mut c_int, argv: *mut *mut *mut c_char) {
    let mut args: Vec<String> = Vec::new();
    let mut ptrs: Vec<*mut c_char> = Vec::new();
    // SAFETY: argv holds *argc valid C strings, as main received them.
    unsafe {
        if !argc.is_null() && !argv.is_null() && !(*argv).is_null() && *argc > 0 {
            for i in 0..*argc as usize {
                let p = *(*argv).add(i);
                if p.is_null() {
                    break;
                }
                ptrs.push(p);
                args.push(CStr::from_ptr(p).to_string_lossy().into_owned());
            }
        }
    }
    let mut kept = args.clone();
    let mut opts = rec::options_from_args(&mut kept);
    if kept.len() != args.len() {
        let keep: Vec<*mut c_char> = args
            .iter()
            .zip(&ptrs)
            .filter(|(a, _)| !a.starts_with("--gaspard-"))
            .map(|(_, p)| *p)
            .collect();
        // SAFETY: we only shrink the array the program gave us and keep its NULL end.
        unsafe {
            for (i, p) in keep.iter().enumerate() {
                *(*argv).add(i) = *p;
            }
            *(*argv).add(keep.len()) = std::ptr::null_mut();
            *argc = keep.len() as c_int;
        }
    }
    if !args.is_empty() {
        opts.command = kept;
    }
    rec::init_process(opts);
}

fn ensure_init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        rec::init_process(rec::options_from_args(&mut Vec::new()));
    });
}

/// The calling thread's context for the model of `ctx` (or UPC).
fn own_context(ctx: *mut c_void) -> *mut Ctx {
    ensure_init();
    rec::gaspard_context_for_thread(ctx.cast())
}

/// `gasp_init`: one context per thread and language model.
///
/// # Safety
/// `argc` and `argv` are null or point to main's arguments.
#[no_mangle]
pub unsafe extern "C" fn gasp_init(
    model: c_int,
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
) -> *mut c_void {
    catch_unwind(|| {
        static FIRST: std::sync::Once = std::sync::Once::new();
        // SAFETY: forwarded from our caller's contract.
        FIRST.call_once(|| unsafe { init_from_args(argc, argv) });
        ensure_init();
        rec::context_for(model.max(0) as u32).cast()
    })
    .unwrap_or(std::ptr::null_mut())
}

/// `gasp_control`: measurement on or off for this context; returns the previous value.
#[no_mangle]
pub extern "C" fn gasp_control(ctx: *mut c_void, on: c_int) -> c_int {
    catch_unwind(|| rec::set_measurement(own_context(ctx), on)).unwrap_or(1)
}

/// `gasp_create_event`: an id in the user-event range, the same for the same name.
///
/// # Safety
/// `name` and `desc` are null or NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn gasp_create_event(
    _ctx: *mut c_void,
    name: *const c_char,
    desc: *const c_char,
) -> c_uint {
    catch_unwind(|| {
        ensure_init();
        // SAFETY: the caller passes NUL-terminated strings or null.
        let name = if name.is_null() {
            "(unnamed)".to_string()
        } else {
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned()
        };
        // SAFETY: as above.
        let desc = (!desc.is_null()).then(|| {
            unsafe { CStr::from_ptr(desc) }
                .to_string_lossy()
                .into_owned()
        });
        // SAFETY: constants defined by the shim.
        let range = unsafe {
            UserEventRange {
                start: gaspard_userevt_start,
                end: gaspard_userevt_end,
            }
        };
        match rec::create_user_event(&name, desc.as_deref(), range) {
            Some((id, schema)) => {
                // SAFETY: `schema` is null or a leaked, NUL-terminated byte string.
                unsafe { gaspard_set_user_schema(id, schema) };
                id
            }
            None => range.end,
        }
    })
    .unwrap_or(0)
}

/// This thread's UPC context, for `pupc.h`.
#[no_mangle]
pub extern "C" fn gaspard_pupc_context() -> *mut c_void {
    catch_unwind(|| {
        ensure_init();
        rec::context_for(MODEL_UPC).cast()
    })
    .unwrap_or(std::ptr::null_mut())
}

/// The calling thread's context for `model` (a `gasp_model_t`, or 5 for
/// OpenMP), created on first use; for gaspard's own adapters.
#[no_mangle]
pub extern "C" fn gaspard_context(model: c_uint) -> *mut c_void {
    catch_unwind(|| {
        ensure_init();
        rec::context_for(model).cast()
    })
    .unwrap_or(std::ptr::null_mut())
}

/// `pupc_control`.
#[no_mangle]
pub extern "C" fn pupc_control(on: c_int) -> c_int {
    gasp_control(gaspard_pupc_context(), on)
}

/// `pupc_create_event`.
///
/// # Safety
/// As `gasp_create_event`.
#[no_mangle]
pub unsafe extern "C" fn pupc_create_event(name: *const c_char, desc: *const c_char) -> c_uint {
    // SAFETY: forwarded contract.
    unsafe { gasp_create_event(gaspard_pupc_context(), name, desc) }
}

/// `pupc_ticks_now`: the recording clock.
#[no_mangle]
pub extern "C" fn pupc_ticks_now() -> u64 {
    rec::now_ticks()
}

/// The process's time in nanoseconds as its trace states it (the clock of
/// its clock references): what the adapters exchange to synchronize the
/// clocks of processes.
#[no_mangle]
pub extern "C" fn gaspard_clock_ns() -> u64 {
    catch_unwind(|| {
        ensure_init();
        rec::reference_ns()
    })
    .unwrap_or(0)
}

/// `pupc_ticks_to_us`: a tick difference in microseconds.
#[no_mangle]
pub extern "C" fn pupc_ticks_to_us(ticks: u64) -> c_uint {
    catch_unwind(|| {
        ensure_init();
        (ticks as f64 / rec::ticks_per_us()).min(f64::from(u32::MAX)) as c_uint
    })
    .unwrap_or(0)
}

/// `pupc_tick_granularityus`: the clock resolves well below a microsecond; 1 is the
/// smallest whole answer.
#[no_mangle]
pub extern "C" fn pupc_tick_granularityus() -> c_uint {
    1
}

/// Writes out everything recorded so far and marks the trace complete
/// (what exit does). Later events are not recorded.
#[no_mangle]
pub extern "C" fn gaspard_flush() {
    let _ = catch_unwind(rec::finish);
}
