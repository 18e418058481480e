//! Fatal signals: seal every buffer, let the flusher write it out, then let
//! the program's own handler or the default action run.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

const SIGNALS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGABRT,
    libc::SIGTERM,
    libc::SIGINT,
];
static HANDLING: AtomicBool = AtomicBool::new(false);
/// The signal that stopped the process, 0 if none.
pub(crate) static CRASH_SIGNAL: AtomicI32 = AtomicI32::new(0);

static mut OLD: [std::mem::MaybeUninit<libc::sigaction>; 5] = [std::mem::MaybeUninit::zeroed(); 5];

pub(crate) fn install() {
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: sigaction with a zeroed, then filled, struct; OLD[i] is written
        // here once, before the handler can run for this signal.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal
                as extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)
                as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            let old = std::ptr::addr_of_mut!(OLD[i]).cast::<libc::sigaction>();
            libc::sigaction(sig, &sa, old);
        }
    }
}

pub(crate) fn name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, _uctx: *mut libc::c_void) {
    if !HANDLING.swap(true, Ordering::SeqCst) {
        CRASH_SIGNAL.store(sig, Ordering::SeqCst);
        if let Some(p) = crate::process::started() {
            // Only atomics, nanosleep and the lock-free queue from here: no allocation.
            p.crash_flush();
        }
    }
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    // SAFETY: restoring the action saved at install time, then re-raising so
    // that it runs once this handler returns (the signal is blocked meanwhile).
    unsafe {
        let old = std::ptr::addr_of!(OLD[i]).cast::<libc::sigaction>();
        libc::sigaction(sig, old, std::ptr::null_mut());
        // A fault raised by the kernel repeats by itself when the instruction re-executes.
        let kernel_fault =
            !info.is_null() && (*info).si_code > 0 && matches!(sig, libc::SIGSEGV | libc::SIGBUS);
        if !kernel_fault {
            libc::raise(sig);
        }
    }
}
