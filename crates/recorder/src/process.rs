//! Process-wide state: options, the output directory, contexts, buffers,
//! user events, and the hand-off to the flusher.

use std::path::PathBuf;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use gaspard_format::manifest::StreamEntry;
use gaspard_format::user::parse_format;

use crate::clock;
use crate::flusher::{self, Buffer};
use crate::{ctx_slot, Ctx, CtxState, MAX_CONTEXTS};

/// Bytes every buffer keeps after the writable end for a GASPARD_LOST record
/// (`GASPARD_LOST_RESERVE`).
const LOST_RESERVE: usize = 64;

/// Bytes of a context's first buffer mapped in ahead of its writer: about
/// 10,000 events; a thread that records more gets the rest mapped in with
/// its next buffer, and faults the pages of this one past here itself.
const FIRST_POPULATE: usize = 64 * 1024;

/// What to do when every buffer is full and the memory cap is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFull {
    /// The thread waits for the flusher to free a buffer: nothing is lost.
    Wait,
    /// Events are dropped and counted, with the time span they cover.
    Drop,
}

/// Recording options, from the environment and `--gaspard-*` arguments.
#[derive(Debug, Clone)]
pub struct Options {
    /// Output directory (`GASPARD_DIR`, `--gaspard-dir=`).
    pub dir: Option<PathBuf>,
    /// Bytes recorded per pointer-to-shared argument.
    pub pts_bytes: u32,
    /// Size of one buffer in KiB (`GASPARD_BUFFER_KB`).
    pub buffer_kb: usize,
    /// Cap on buffer memory per process in MiB (`GASPARD_MAX_MB`).
    pub max_mb: usize,
    /// Policy at the cap (`GASPARD_ON_FULL=wait|drop`).
    pub on_full: OnFull,
    /// `tsc` or `monotonic` (`GASPARD_CLOCK`); default: the TSC when invariant.
    pub clock: Option<String>,
    /// Milliseconds the flusher waits before each write (`GASPARD_FLUSH_DELAY_MS`):
    /// a slow disk on purpose, to test back-pressure and the memory cap.
    pub flush_delay_ms: u64,
    /// Throttling of instrumented C functions (`GASPARD_THROTTLE=CALLS,US` or
    /// `off`): a function called more than CALLS times for less than US
    /// microseconds on average on one thread is no longer recorded in the process.
    pub throttle: Option<(u64, u64)>,
    /// Whether the hook calls of a throttled C function are patched out of
    /// the code on x86-64, and throttled allocation call sites patched to
    /// call the C library directly (`GASPARD_THROTTLE_PATCH=1`, the default,
    /// or `0`).
    pub throttle_patch: bool,
    /// Profile-only mode (`GASPARD_PROFILE_ONLY=1`): counts, times and bytes
    /// per event name and callsite are kept, not the events.
    pub profile_only: bool,
    /// Testing aid: nanoseconds added to this process's clock
    /// (`GASPARD_CLOCK_SKEW_NS`), to see clock synchronization correct it.
    pub clock_skew_ns: i64,
    /// Testing aid: parts per million this process's clock runs fast
    /// (`GASPARD_CLOCK_DRIFT_PPM`, negative: slow).
    pub clock_drift_ppm: f64,
    /// Testing aid: the rank (`OMPI_COMM_WORLD_RANK`, `PMIX_RANK` or
    /// `PMI_RANK`) whose clock gets the skew and drift
    /// (`GASPARD_CLOCK_SKEW_RANK`); every process's when unset.
    pub clock_skew_rank: Option<u32>,
    /// Every process measures its clock against rank or PE 0's
    /// (`GASPARD_CLOCK_SYNC_ALL=1`), not only those on other machines or
    /// with an artificial error.
    pub clock_sync_all: bool,
    /// The command line.
    pub command: Vec<String>,
    /// Problems found in the options, reported once.
    pub warnings: Vec<String>,
}

impl Default for Options {
    fn default() -> Self {
        let command = std::fs::read("/proc/self/cmdline")
            .map(|b| {
                b.split(|&c| c == 0)
                    .filter(|s| !s.is_empty())
                    .map(|s| String::from_utf8_lossy(s).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        let mut o = Options {
            dir: None,
            // SAFETY: reads a constant defined in C.
            pts_bytes: unsafe { crate::gaspard_pts_bytes_value() },
            buffer_kb: 1024,
            max_mb: 256,
            on_full: OnFull::Wait,
            clock: None,
            flush_delay_ms: 0,
            throttle: Some((100_000, 10)),
            throttle_patch: true,
            profile_only: false,
            clock_skew_ns: 0,
            clock_drift_ppm: 0.0,
            clock_skew_rank: None,
            clock_sync_all: false,
            command,
            warnings: Vec::new(),
        };
        for (k, v) in std::env::vars() {
            if let Some(key) = k.strip_prefix("GASPARD_") {
                o.set(&key.to_ascii_lowercase().replace('_', "-"), &v, false);
            }
        }
        o
    }
}

impl Options {
    fn set(&mut self, key: &str, v: &str, from_args: bool) -> bool {
        let num = |o: &mut Options, v: &str| -> Option<usize> {
            match v.parse::<usize>() {
                Ok(n) if n > 0 => Some(n),
                _ => {
                    o.warnings.push(format!(
                        "gaspard: ignoring {key}={v}: expected a positive number"
                    ));
                    None
                }
            }
        };
        match key {
            "dir" => self.dir = Some(PathBuf::from(v)),
            "buffer-kb" => {
                if let Some(n) = num(self, v) {
                    self.buffer_kb = n.clamp(64, 1 << 20);
                }
            }
            "max-mb" => {
                if let Some(n) = num(self, v) {
                    self.max_mb = n;
                }
            }
            "on-full" => match v {
                "wait" => self.on_full = OnFull::Wait,
                "drop" => self.on_full = OnFull::Drop,
                _ => self.warnings.push(format!(
                    "gaspard: ignoring on-full={v}: expected wait or drop"
                )),
            },
            "flush-delay-ms" => match v.parse() {
                Ok(n) => self.flush_delay_ms = n,
                Err(_) => self
                    .warnings
                    .push(format!("gaspard: ignoring flush-delay-ms={v}")),
            },
            "throttle" => {
                let parsed = v.split_once(',').and_then(|(c, us)| {
                    Some((
                        c.trim().parse::<u64>().ok()?,
                        us.trim().parse::<u64>().ok()?,
                    ))
                });
                match (v, parsed) {
                    ("off" | "0", _) => self.throttle = None,
                    (_, Some((c, us))) if c > 0 && us > 0 => self.throttle = Some((c, us)),
                    _ => self.warnings.push(format!(
                        "gaspard: ignoring throttle={v}: expected CALLS,MICROSECONDS (e.g. 100000,10) or off"
                    )),
                }
            }
            "throttle-patch" => match v {
                "1" | "on" | "yes" => self.throttle_patch = true,
                "0" | "off" | "no" => self.throttle_patch = false,
                _ => self.warnings.push(format!(
                    "gaspard: ignoring throttle-patch={v}: expected 1 or 0"
                )),
            },
            "profile-only" => match v {
                "1" | "on" | "yes" | "" => self.profile_only = true,
                "0" | "off" | "no" => self.profile_only = false,
                _ => self.warnings.push(format!(
                    "gaspard: ignoring profile-only={v}: expected 1 or 0"
                )),
            },
            "clock-skew-ns" => match v.parse() {
                Ok(n) => self.clock_skew_ns = n,
                Err(_) => self.warnings.push(format!(
                    "gaspard: ignoring clock-skew-ns={v}: expected nanoseconds"
                )),
            },
            "clock-drift-ppm" => match v.parse::<f64>() {
                Ok(n) if n.is_finite() && n.abs() < 1e5 => self.clock_drift_ppm = n,
                _ => self.warnings.push(format!(
                    "gaspard: ignoring clock-drift-ppm={v}: expected parts per million"
                )),
            },
            "clock-skew-rank" => match v.parse() {
                Ok(n) => self.clock_skew_rank = Some(n),
                Err(_) => self.warnings.push(format!(
                    "gaspard: ignoring clock-skew-rank={v}: expected a rank"
                )),
            },
            "clock-sync-all" => match v {
                "1" | "on" | "yes" | "" => self.clock_sync_all = true,
                "0" | "off" | "no" => self.clock_sync_all = false,
                _ => self.warnings.push(format!(
                    "gaspard: ignoring clock-sync-all={v}: expected 1 or 0"
                )),
            },
            "clock" => match v {
                "tsc" | "monotonic" => self.clock = Some(v.to_string()),
                _ => self.warnings.push(format!(
                    "gaspard: ignoring clock={v}: expected tsc or monotonic"
                )),
            },
            _ => {
                if from_args {
                    self.warnings
                        .push(format!("gaspard: unknown option --gaspard-{key}"));
                }
                return from_args;
            }
        }
        true
    }
}

/// Takes gaspard's own `--gaspard-KEY=VALUE` arguments out of `args`
/// (leaving the program's) and applies them over the environment's options.
pub fn options_from_args(args: &mut Vec<String>) -> Options {
    let mut o = Options::default();
    args.retain(|a| match a.strip_prefix("--gaspard-") {
        Some(kv) => {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            !o.set(k, v, true)
        }
        None => true,
    });
    o
}

/// The range user-event ids must fall in (`GASP_UPC_USEREVT_START..END`).
#[derive(Debug, Clone, Copy)]
pub struct UserEventRange {
    /// First id.
    pub start: u32,
    /// Last id, inclusive.
    pub end: u32,
}

#[derive(Debug, Clone)]
pub(crate) struct UserEntry {
    pub(crate) id: u32,
    pub(crate) name: String,
    pub(crate) desc: Option<String>,
    /// NUL-terminated `VaType` codes; never freed (the C side keeps the pointer).
    pub(crate) schema: Option<&'static [u8]>,
    pub(crate) unreadable: Option<String>,
}

/// The process's recorder.
#[derive(Debug)]
pub(crate) struct Process {
    pub(crate) dir: PathBuf,
    pub(crate) prefix: String,
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) command: Vec<String>,
    pub(crate) pts_bytes: u32,
    pub(crate) start_unix_ns: u64,
    pub(crate) clock_ref: (u64, u64),
    pub(crate) realtime_ref: (u64, u64),
    buffer_bytes: usize,
    max_buffers: usize,
    on_full: OnFull,
    pub(crate) flush_delay_ms: u64,
    pub(crate) throttle: Option<(u64, u64)>,
    pub(crate) throttle_patch: bool,
    pub(crate) profile_only: bool,
    pub(crate) queue: AtomicPtr<Buffer>,
    free: Mutex<Vec<usize>>,
    /// Payloads (address, length) of buffers allocated since the flusher
    /// last looked: it maps their pages in ahead of their writer.
    fresh: Mutex<Vec<(usize, usize)>>,
    allocated: AtomicUsize,
    nctx: AtomicUsize,
    pub(crate) streams: Mutex<Vec<StreamEntry>>,
    pub(crate) users: Mutex<Vec<UserEntry>>,
    pub(crate) requested: AtomicU64,
    pub(crate) done: AtomicU64,
    /// Bumped when `done` moves on; waiters sleep on it (a futex).
    pub(crate) done_seq: AtomicU32,
    /// Bumped to wake the flusher, which sleeps on it (a futex) when idle.
    pub(crate) wake_seq: AtomicU32,
    pub(crate) finalizing: AtomicBool,
    pub(crate) flusher_tid: AtomicI32,
    /// The executable mappings last written to `<prefix>.maps`.
    pub(crate) maps_written: Mutex<Option<String>>,
    flusher_thread: OnceLock<std::thread::Thread>,
    pub(crate) events: AtomicU64,
    pub(crate) lost: AtomicU64,
    pub(crate) bad_contexts: AtomicU64,
    pub(crate) notes: Mutex<Vec<String>>,
    forked: AtomicBool,
    threads: AtomicU32,
}

static PROCESS: OnceLock<Option<Process>> = OnceLock::new();

/// The process state of a forked child, made by the child handler: it
/// replaces the parent's (which the child keeps untouched, never flushed).
static CHILD: AtomicPtr<Process> = AtomicPtr::new(std::ptr::null_mut());

/// The process state in effect, without starting anything.
fn current() -> Option<&'static Process> {
    let c = CHILD.load(Ordering::Acquire);
    if !c.is_null() {
        // SAFETY: made by Box::leak in the child handler, never freed.
        return Some(unsafe { &*c });
    }
    PROCESS.get().and_then(Option::as_ref)
}

/// The process state, initialised with the environment's options if nobody
/// initialised it first. `None` when recording is impossible (no directory)
/// or stopped (in a forked child that could not set up its own recording).
pub(crate) fn get() -> Option<&'static Process> {
    let p = match current() {
        Some(p) => p,
        None => PROCESS
            .get_or_init(|| Process::new(Options::default()))
            .as_ref()?,
    };
    if p.forked.load(Ordering::Relaxed) {
        return None;
    }
    p.start();
    Some(p)
}

/// The process state if it has started recording (its flusher runs):
/// for exit and signal handlers, which must not start anything.
pub(crate) fn started() -> Option<&'static Process> {
    current().filter(|p| p.flusher_thread.get().is_some() && !p.forked.load(Ordering::Relaxed))
}

pub(crate) fn init(opts: Options) -> Option<&'static Process> {
    PROCESS.get_or_init(|| Process::new(opts));
    get()
}

/// This process's rank as its launcher gives it (Open MPI's `mpirun` and
/// `oshrun`, PMIx, PMI).
fn launcher_rank() -> Option<u32> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"]
        .iter()
        .find_map(|k| std::env::var(k).ok()?.parse().ok())
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

impl Process {
    fn new(opts: Options) -> Option<Process> {
        for w in opts.warnings.iter().chain(&crate::filter::install()) {
            eprintln!("{w}");
        }
        clock::set_tsc(clock::choose_tsc(opts.clock.as_deref()));
        if (opts.clock_skew_ns != 0 || opts.clock_drift_ppm != 0.0)
            && opts
                .clock_skew_rank
                .is_none_or(|r| launcher_rank() == Some(r))
        {
            clock::set_skew(opts.clock_skew_ns, opts.clock_drift_ppm);
        }
        clock::set_sync_all(opts.clock_sync_all);
        let start_unix_ns = clock::realtime_ns();
        let dir = opts.dir.clone().unwrap_or_else(|| {
            let prog = opts
                .command
                .first()
                .and_then(|a| std::path::Path::new(a).file_name())
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "program".into());
            PathBuf::from(format!(
                "gaspard-{prog}-{}",
                gaspard_format::manifest::utc_stamp(start_unix_ns / 1_000_000_000)
            ))
        });
        if let Err(e) = std::fs::create_dir_all(&dir) {
            eprintln!(
                "gaspard: cannot create trace directory {}: {e}; nothing will be recorded",
                dir.display()
            );
            return None;
        }
        let host = hostname();
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u32;
        let (ticks, mono) = clock::monotonic_pair();
        clock::set_reference(ticks, mono);
        let (ticks, mono) = clock::reference_pair();
        let buffer_bytes = opts.buffer_kb * 1024;
        Some(Process {
            prefix: format!("{}-{pid}", host.replace(['/', ' '], "_")),
            dir,
            host,
            pid,
            command: opts.command,
            pts_bytes: opts.pts_bytes,
            start_unix_ns,
            clock_ref: (ticks, mono),
            realtime_ref: (mono, start_unix_ns),
            buffer_bytes,
            max_buffers: (opts.max_mb * 1024 / opts.buffer_kb).max(2),
            on_full: opts.on_full,
            flush_delay_ms: opts.flush_delay_ms,
            throttle: opts.throttle,
            throttle_patch: opts.throttle_patch,
            profile_only: opts.profile_only,
            queue: AtomicPtr::new(std::ptr::null_mut()),
            free: Mutex::new(Vec::new()),
            fresh: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
            nctx: AtomicUsize::new(0),
            streams: Mutex::new(Vec::new()),
            users: Mutex::new(Vec::new()),
            requested: AtomicU64::new(0),
            done: AtomicU64::new(0),
            done_seq: AtomicU32::new(0),
            wake_seq: AtomicU32::new(0),
            finalizing: AtomicBool::new(false),
            flusher_tid: AtomicI32::new(0),
            maps_written: Mutex::new(None),
            flusher_thread: OnceLock::new(),
            events: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            bad_contexts: AtomicU64::new(0),
            notes: Mutex::new(Vec::new()),
            forked: AtomicBool::new(false),
            threads: AtomicU32::new(0),
        })
    }

    /// Starts the flusher and the exit and signal handlers, once.
    fn start(&'static self) {
        if self.flusher_thread.get().is_some() {
            return;
        }
        let mut started = false;
        self.flusher_thread.get_or_init(|| {
            started = true;
            let h = std::thread::Builder::new()
                .name("gaspard-flusher".into())
                .spawn(move || flusher::run(self))
                .expect("gaspard: cannot start the flusher thread");
            h.thread().clone()
        });
        if !started {
            return;
        }
        // The space set aside and the first manifest are written by the
        // flusher as it starts, off the program's thread.
        static HANDLERS: std::sync::Once = std::sync::Once::new();
        HANDLERS.call_once(|| {
            extern "C" fn at_exit() {
                crate::finish();
            }
            extern "C" fn in_child() {
                forked_child();
            }
            // SAFETY: registering plain extern "C" functions with libc.
            unsafe {
                libc::atexit(at_exit);
                libc::pthread_atfork(None, None, Some(in_child));
            }
            crate::signals::install();
        });
    }

    /// The state of a forked child (the calling thread, the only one left):
    /// the same options and directory; its own pid, file names, clock
    /// references, buffers, counters, notes and flusher (started on first
    /// use); the contexts of the calling thread kept, as streams of its own,
    /// without what the parent had recorded in them; the other threads'
    /// contexts dead. User events are kept (the child goes on using them).
    fn for_child(&self) -> Process {
        // SAFETY: getpid and getppid have no preconditions.
        let (pid, ppid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
        let prefix = format!("{}-{pid}", self.host.replace(['/', ' '], "_"));
        let me = crate::gaspard_tls_marker_addr_safe();
        let nctx = self.contexts();
        let mut streams = Vec::new();
        for i in 0..nctx {
            let c = ctx_slot(i);
            // SAFETY: a published slot; in the child no other thread exists.
            unsafe {
                let st = (*c).rs.cast::<CtxState>();
                let mine = (*c).owner == me;
                (*c).cur = std::ptr::null_mut();
                (*c).end = std::ptr::null_mut();
                (*c).unknown_tags = 0;
                (*c).filtered = 0;
                if !st.is_null() {
                    // The buffer holds the parent's events: the parent writes them.
                    (*st).buf = std::ptr::null_mut();
                    (*st).dropped = 0;
                    (*st).drop_first = 0;
                    (*st).drop_last = 0;
                    (*st).lock.store(0, Ordering::Relaxed);
                }
                if mine {
                    streams.push(StreamEntry {
                        id: i as u32,
                        file: format!("{prefix}-{i}.gst"),
                        model: (*c).model,
                        tid,
                        thread: streams.len() as u32,
                    });
                } else {
                    // A thread that does not exist in the child.
                    (*c).on = 0;
                    (*c).owner = std::ptr::null();
                }
            }
        }
        let users = match self.users.try_lock() {
            Ok(u) => u.clone(),
            Err(std::sync::TryLockError::Poisoned(u)) => u.into_inner().clone(),
            // Held by a thread that is gone: start without the definitions.
            Err(std::sync::TryLockError::WouldBlock) => Vec::new(),
        };
        let start_unix_ns = clock::realtime_ns();
        let (ticks, mono) = clock::reference_pair();
        let threads = streams.len() as u32;
        Process {
            dir: self.dir.clone(),
            prefix,
            host: self.host.clone(),
            pid,
            command: self.command.clone(),
            pts_bytes: self.pts_bytes,
            start_unix_ns,
            clock_ref: (ticks, mono),
            realtime_ref: (mono, start_unix_ns),
            buffer_bytes: self.buffer_bytes,
            max_buffers: self.max_buffers,
            on_full: self.on_full,
            flush_delay_ms: self.flush_delay_ms,
            throttle: self.throttle,
            throttle_patch: self.throttle_patch,
            profile_only: self.profile_only,
            queue: AtomicPtr::new(std::ptr::null_mut()),
            free: Mutex::new(Vec::new()),
            fresh: Mutex::new(Vec::new()),
            allocated: AtomicUsize::new(0),
            nctx: AtomicUsize::new(nctx),
            streams: Mutex::new(streams),
            users: Mutex::new(users),
            requested: AtomicU64::new(0),
            done: AtomicU64::new(0),
            done_seq: AtomicU32::new(0),
            wake_seq: AtomicU32::new(0),
            finalizing: AtomicBool::new(false),
            flusher_tid: AtomicI32::new(0),
            maps_written: Mutex::new(None),
            flusher_thread: OnceLock::new(),
            events: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            bad_contexts: AtomicU64::new(0),
            notes: Mutex::new(vec![format!(
                "forked from process {}-{ppid}: this process's events are those after the fork",
                self.host.replace(['/', ' '], "_")
            )]),
            forked: AtomicBool::new(false),
            threads: AtomicU32::new(threads),
        }
    }

    /// Wakes the flusher. Async-signal-safe: an atomic and a futex system call.
    pub(crate) fn wake_flusher(&self) {
        self.wake_seq.fetch_add(1, Ordering::Release);
        futex_wake(&self.wake_seq);
    }

    pub(crate) fn new_context(&self, model: u32) -> Option<usize> {
        let i = self.nctx.fetch_add(1, Ordering::AcqRel);
        if i >= MAX_CONTEXTS {
            self.nctx.store(MAX_CONTEXTS, Ordering::Relaxed);
            self.note(format!(
                "more than {MAX_CONTEXTS} contexts: threads beyond were not recorded"
            ));
            return None;
        }
        // SAFETY: a plain C allocation of the encoder state.
        let enc = unsafe { crate::gaspard_enc_new() };
        if enc.is_null() {
            self.note("out of memory for a context's encoder: a thread was not recorded".into());
            return None;
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as u64;
        let thread = self.threads.fetch_add(1, Ordering::Relaxed);
        self.streams
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(StreamEntry {
                id: i as u32,
                file: format!("{}-{i}.gst", self.prefix),
                model,
                tid,
                thread,
            });
        let st = Box::into_raw(Box::new(CtxState {
            lock: std::sync::atomic::AtomicU32::new(0),
            buf: std::ptr::null_mut(),
            stream: i as u32,
            dropped: 0,
            drop_first: 0,
            drop_last: 0,
            control: 1,
        }));
        let c = ctx_slot(i);
        // SAFETY: slot `i` was handed out to this thread alone by the fetch_add above.
        unsafe {
            (*c).cur = std::ptr::null_mut();
            (*c).end = std::ptr::null_mut();
            (*c).owner = crate::gaspard_tls_marker_addr();
            (*c).on = 1;
            (*c).model = model;
            (*c).unknown_tags = 0;
            (*c).enc = enc;
            std::ptr::addr_of_mut!((*c).rs)
                .cast::<AtomicPtr<CtxState>>()
                .as_ref()
                .unwrap()
                .store(st, Ordering::Release);
        }
        Some(i)
    }

    /// A user event's definition, by id.
    pub(crate) fn user_def(&self, id: u64) -> Option<gaspard_format::codec::UserDef> {
        let users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        users
            .iter()
            .find(|u| u64::from(u.id) == id)
            .map(|u| gaspard_format::codec::UserDef {
                id,
                name: u.name.clone(),
                desc: u.desc.clone(),
                unreadable: u.unreadable.clone(),
            })
    }

    /// Adds a line to the manifest's notes (once).
    pub fn note(&self, s: String) {
        let mut n = self.notes.lock().unwrap_or_else(|e| e.into_inner());
        if !n.contains(&s) {
            n.push(s);
        }
    }

    pub(crate) fn note_bad_context(&self, addr: usize) {
        if self.bad_contexts.fetch_add(1, Ordering::Relaxed) == 0 {
            self.note(format!(
                "events arrived with a null or unknown context ({addr:#x}): recorded in the calling thread's own"
            ));
        }
    }

    pub(crate) fn contexts(&self) -> usize {
        self.nctx.load(Ordering::Acquire).min(MAX_CONTEXTS)
    }

    /// Hands the flusher the part of `buf` not yet mapped in ahead of its
    /// writer ([`Process::populate_fresh`]); whether there was one.
    fn populate_rest(&self, buf: &mut Buffer) -> bool {
        if buf.populated >= buf.bytes.len() {
            return false;
        }
        let rest = buf.bytes.len() - buf.populated;
        self.fresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((buf.bytes.as_ptr() as usize + buf.populated, rest));
        buf.populated = buf.bytes.len();
        true
    }

    /// A buffer for a context, `first` when it is the context's first: of a
    /// new buffer, the flusher maps in only the first [`FIRST_POPULATE`]
    /// bytes for a context's first (a thread that records a few events
    /// does not cost a whole buffer of pages), the whole for the next ones
    /// (the rest of a first buffer when it is taken again).
    fn take_buffer(&self, first: bool) -> Option<*mut Buffer> {
        if let Some(b) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            let b = b as *mut Buffer;
            // SAFETY: a buffer on the free list is owned by whoever pops it.
            let buf = unsafe { &mut *b };
            self.populate_rest(buf);
            return Some(b);
        }
        let n = self.allocated.fetch_add(1, Ordering::Relaxed);
        if n >= self.max_buffers {
            self.allocated.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        let mut bytes = vec![0u8; self.buffer_bytes].into_boxed_slice();
        let populated = if first {
            FIRST_POPULATE.min(bytes.len())
        } else {
            bytes.len()
        };
        self.fresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((bytes.as_mut_ptr() as usize, populated));
        Some(Box::into_raw(Box::new(Buffer {
            next: std::ptr::null_mut(),
            stream: 0,
            len: 0,
            events: 0,
            base_ts: 0,
            last_ts: 0,
            populated,
            bytes,
        })))
    }

    /// Maps in the pages of the buffers allocated since the last call, so
    /// that the threads writing them do not stop at a page fault every 4 KiB
    /// (1.5 to 2 µs each on a virtual machine): called by the flusher, which
    /// a refill wakes. `MADV_POPULATE_WRITE` leaves the content alone, so a
    /// writer already at work in the buffer is not disturbed. Kernels before
    /// 5.14 refuse it: the writers then fault the pages in themselves.
    pub(crate) fn populate_fresh(&self) {
        static REFUSED: AtomicBool = AtomicBool::new(false);
        let fresh = std::mem::take(&mut *self.fresh.lock().unwrap_or_else(|e| e.into_inner()));
        if fresh.is_empty() || REFUSED.load(Ordering::Relaxed) {
            return;
        }
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| p.is_power_of_two())
            .unwrap_or(4096);
        for (addr, len) in fresh {
            let start = addr.next_multiple_of(page);
            let end = (addr + len) / page * page;
            if end <= start {
                continue;
            }
            // SAFETY: [start, end) lies in a buffer's payload, which is never
            // freed (buffers are recycled, or leaked at the end); populating
            // changes neither its content nor its mapping's protection.
            let rc = unsafe {
                libc::madvise(
                    start as *mut libc::c_void,
                    end - start,
                    libc::MADV_POPULATE_WRITE,
                )
            };
            if rc != 0 {
                REFUSED.store(true, Ordering::Relaxed);
                return;
            }
        }
    }

    pub(crate) fn recycle(&self, b: *mut Buffer) {
        if self.finalizing.load(Ordering::Acquire) {
            // A late writer may still hold a pointer into it: never reuse now.
            return;
        }
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(b as usize);
    }

    pub(crate) fn push(&self, b: *mut Buffer) {
        let mut head = self.queue.load(Ordering::Relaxed);
        loop {
            // SAFETY: `b` is ours until the exchange publishes it.
            unsafe { (*b).next = head };
            match self
                .queue
                .compare_exchange_weak(head, b, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(h) => head = h,
            }
        }
    }

    /// Seals the context's buffer and queues it. Caller holds the context's lock.
    fn seal(&self, c: *mut Ctx, st: &mut CtxState) {
        if st.buf.is_null() {
            return;
        }
        // SAFETY: `c` is a live slot; cur is read with acquire to see the owner's stores.
        unsafe {
            let cur =
                (*std::ptr::addr_of!((*c).cur).cast::<AtomicPtr<u8>>()).load(Ordering::Acquire);
            let b = st.buf;
            let start = (*b).bytes.as_mut_ptr();
            (*b).len = if cur.is_null() {
                0
            } else {
                cur.offset_from(start).max(0) as usize
            };
            (*b).stream = st.stream;
            let stats = crate::enc_stats((*c).enc);
            (*b).events = stats.events;
            (*b).base_ts = stats.base_ts;
            (*b).last_ts = stats.last_ts;
            (*c).cur = std::ptr::null_mut();
            (*c).end = std::ptr::null_mut();
            st.buf = std::ptr::null_mut();
            if (*b).len == 0 {
                self.recycle(b);
            } else {
                self.push(b);
            }
        }
    }

    pub(crate) fn refill(&self, c: *mut Ctx) -> *mut u8 {
        let Some(_) = crate::ctx_index(c) else {
            return std::ptr::null_mut();
        };
        // SAFETY: a live slot; rs is set before the slot is handed out.
        let st = unsafe { (*c).rs }.cast::<CtxState>();
        if st.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: the CtxState lives as long as the process.
        let st = unsafe { &mut *st };
        if !st.try_lock() {
            return std::ptr::null_mut();
        }
        let r = self.refill_locked(c, st);
        st.unlock();
        r
    }

    fn refill_locked(&self, c: *mut Ctx, st: &mut CtxState) -> *mut u8 {
        if self.finalizing.load(Ordering::Acquire) {
            return std::ptr::null_mut();
        }
        // A first buffer's writer at the end of the pages mapped in ahead
        // of it: the rest is mapped in (by the flusher) and the writer goes
        // on in the same buffer.
        if !st.buf.is_null() {
            // SAFETY: the context's own buffer, which only its holder writes.
            let buf = unsafe { &mut *st.buf };
            if self.populate_rest(buf) {
                self.wake_flusher();
                // SAFETY: a live slot; its cursor is inside this buffer, and
                // the end leaves the reserve as for any buffer.
                unsafe {
                    (*c).end = buf.bytes.as_mut_ptr().add(buf.bytes.len() - LOST_RESERVE);
                    return (*c).cur;
                }
            }
        }
        let first = st.buf.is_null();
        let mut b = self.take_buffer(first);
        if b.is_none() && self.on_full == OnFull::Wait {
            // Hand this buffer over first: with many threads and few buffers,
            // holding it could starve everyone.
            self.seal(c, st);
            let mut waited = Duration::ZERO;
            while b.is_none() && !self.finalizing.load(Ordering::Acquire) {
                self.wake_flusher();
                std::thread::sleep(Duration::from_micros(100));
                waited += Duration::from_micros(100);
                b = self.take_buffer(first);
                if waited > Duration::from_secs(30) {
                    // The flusher makes no progress (a stuck disk?): stop waiting, count losses.
                    self.note("the flusher made no progress for 30 s: events were dropped".into());
                    break;
                }
            }
        }
        let now = crate::now_ticks();
        let Some(b) = b else {
            // Dropping: keep the current buffer, whose reserve will say what was lost.
            if st.dropped == 0 {
                st.drop_first = now;
            }
            st.dropped += 1;
            st.drop_last = now;
            // SAFETY: a live slot; every event now comes here until a buffer frees up.
            unsafe { (*c).end = (*c).cur };
            return std::ptr::null_mut();
        };
        self.write_lost(c, st);
        self.seal(c, st);
        self.wake_flusher();
        // SAFETY: `b` is a buffer we own, larger than the margin and the reserve;
        // the encoder is this context's and nobody else writes it now.
        unsafe {
            let populated = (*b).populated;
            let buf = &mut (*b).bytes;
            let start = buf.as_mut_ptr();
            // A first buffer ends, for its writer, where its pages mapped
            // in ahead end (see above).
            let end = start.add(populated.min(buf.len() - LOST_RESERVE));
            st.buf = b;
            crate::gaspard_enc_reset((*c).enc);
            (*c).end = end;
            (*c).cur = start;
            if st.dropped > 0 {
                // No buffer held the losses (the first buffer was not to be had): say it here.
                self.write_lost(c, st);
            }
            (*c).cur
        }
    }

    /// Writes a GASPARD_LOST record (count, first, last) at the context's
    /// write position, into the reserve every buffer keeps for it.
    fn write_lost(&self, c: *mut Ctx, st: &mut CtxState) {
        if st.dropped == 0 || st.buf.is_null() {
            return;
        }
        let args = [st.dropped, st.drop_first, st.drop_last];
        // SAFETY: a live slot holding a buffer; `cur` leaves at least LOST_RESERVE
        // bytes before the buffer's end, and a LOST record takes fewer.
        unsafe {
            if (*c).cur.is_null() {
                return;
            }
            crate::gaspard_emit_plain(
                c,
                u32::from(gaspard_format::kinds::GASPARD_LOST),
                2,
                args.as_ptr(),
                3,
                0,
            );
        }
        self.lost.fetch_add(st.dropped, Ordering::Relaxed);
        st.dropped = 0;
    }

    /// Seals every context's buffer. Contexts busy in their own slow path are skipped.
    fn seal_all(&self) {
        for i in 0..self.contexts() {
            let c = ctx_slot(i);
            // SAFETY: a published slot; rs is read with acquire.
            let st = unsafe {
                (*std::ptr::addr_of!((*c).rs).cast::<AtomicPtr<CtxState>>()).load(Ordering::Acquire)
            };
            if st.is_null() {
                continue;
            }
            // SAFETY: CtxState lives as long as the process.
            let st = unsafe { &mut *st };
            if st.try_lock() {
                self.write_lost(c, st);
                if st.dropped > 0 {
                    // Dropped while no buffer was held: counted, without a record of where.
                    self.lost.fetch_add(st.dropped, Ordering::Relaxed);
                    st.dropped = 0;
                }
                self.seal(c, st);
                st.unlock();
            }
        }
    }

    /// Asks the flusher to write out everything queued and the manifest, and
    /// waits (at most `limit`) until it has. Async-signal-safe: atomics and
    /// futex system calls.
    fn request_and_wait(&self, limit: Duration) {
        let target = self.requested.fetch_add(1, Ordering::AcqRel) + 1;
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::syscall(libc::SYS_gettid) } as i32;
        if me == self.flusher_tid.load(Ordering::Acquire) {
            return;
        }
        self.wake_flusher();
        let start = clock::monotonic_ns();
        let limit = limit.as_nanos() as u64;
        loop {
            let seq = self.done_seq.load(Ordering::Acquire);
            if self.done.load(Ordering::Acquire) >= target {
                return;
            }
            let waited = clock::monotonic_ns() - start;
            if waited > limit {
                return;
            }
            // Woken by the flusher when it is done; the timeout only bounds the wait.
            futex_wait(&self.done_seq, seq, (limit - waited).min(100_000_000));
        }
    }

    /// From a signal handler: no allocation, no lock.
    pub(crate) fn crash_flush(&self) {
        self.finalizing.store(true, Ordering::SeqCst);
        self.seal_all();
        self.request_and_wait(Duration::from_secs(5));
    }

    pub(crate) fn finish(&self) {
        if self.finalizing.swap(true, Ordering::SeqCst) {
            return;
        }
        self.seal_all();
        self.request_and_wait(Duration::from_secs(120));
    }
}

/// Sleeps while `word` holds `seen`, at most `timeout_ns` (FUTEX_WAIT).
pub(crate) fn futex_wait(word: &AtomicU32, seen: u32, timeout_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (timeout_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (timeout_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a futex wait on an aligned u32 we own, with a timeout we own.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            seen,
            &ts as *const libc::timespec,
        )
    };
}

/// Wakes every thread sleeping on `word` (FUTEX_WAKE).
pub(crate) fn futex_wake(word: &AtomicU32) {
    // SAFETY: a futex wake on an aligned u32 we own.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        )
    };
}

/// The child side of fork(): recording goes on in the child's own streams.
fn forked_child() {
    let Some(old) = current() else { return };
    if old.forked.load(Ordering::Relaxed) {
        return;
    }
    let child = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| old.for_child()));
    match child {
        Ok(p) => CHILD.store(Box::into_raw(Box::new(p)), Ordering::Release),
        Err(_) => {
            // Stop recording rather than fill buffers nobody drains.
            old.forked.store(true, Ordering::SeqCst);
            for i in 0..old.contexts() {
                // SAFETY: a published slot; the child is single-threaded here.
                unsafe {
                    let c = ctx_slot(i);
                    (*c).on = 0;
                    (*c).cur = std::ptr::null_mut();
                    (*c).end = std::ptr::null_mut();
                }
            }
        }
    }
}

/// Creates (or finds, by name) a user event. Returns its id and the schema
/// the C side reads its varargs by (null: no arguments are read).
pub fn create_user_event(
    name: &str,
    desc: Option<&str>,
    range: UserEventRange,
) -> Option<(u32, *const u8)> {
    let p = get()?;
    let mut users = p.users.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(u) = users.iter().find(|u| u.name == name) {
        return Some((u.id, u.schema.map_or(std::ptr::null(), |s| s.as_ptr())));
    }
    let id = range.start.checked_add(users.len() as u32)?;
    if id > range.end {
        drop(users);
        p.note(format!(
            "user event '{name}' not created: all {} user event ids are used",
            range.end - range.start + 1
        ));
        return None;
    }
    let (schema, unreadable) = match desc.map(parse_format) {
        None => (Some(&[0u8][..]), None),
        Some(Ok(s)) => {
            let mut codes: Vec<u8> = s.args.iter().map(|&a| a as u8).collect();
            codes.push(0);
            (Some(&*Box::leak(codes.into_boxed_slice())), None)
        }
        Some(Err(e)) => (None, Some(e.0)),
    };
    crate::filter::user_created(name, range.start, id);
    users.push(UserEntry {
        id,
        name: name.to_string(),
        desc: desc.map(str::to_string),
        schema,
        unreadable,
    });
    Some((id, schema.map_or(std::ptr::null(), |s| s.as_ptr())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_are_taken_out() {
        let mut a: Vec<String> = [
            "prog",
            "--gaspard-dir=/tmp/x",
            "keep",
            "--gaspard-on-full=drop",
            "--gaspard-bogus=1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = options_from_args(&mut a);
        assert_eq!(a, vec!["prog", "keep"]);
        assert_eq!(o.dir, Some(PathBuf::from("/tmp/x")));
        assert_eq!(o.on_full, OnFull::Drop);
        assert!(o.warnings.iter().any(|w| w.contains("bogus")));
    }

    #[test]
    fn clock_test_knobs() {
        let mut a: Vec<String> = [
            "prog",
            "--gaspard-clock-skew-ns=-2500",
            "--gaspard-clock-drift-ppm=12.5",
            "--gaspard-clock-skew-rank=3",
            "--gaspard-clock-drift-ppm=fast",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = options_from_args(&mut a);
        assert_eq!(a, vec!["prog"]);
        assert_eq!(o.clock_skew_ns, -2500);
        assert_eq!(o.clock_drift_ppm, 12.5);
        assert_eq!(o.clock_skew_rank, Some(3));
        assert!(o
            .warnings
            .iter()
            .any(|w| w.contains("clock-drift-ppm=fast")));
    }
}
