//! `gaspard report --mpi`: the ranks of an MPI job share the reading of a
//! trace ([`gaspard_analyze::distributed`]); rank 0 prints the report.

use anyhow::{bail, Result};
use gaspard_analyze::distributed::Transport;

/// The MPI calls of csrc/mpi_transport.c, in a shared object linked to
/// MPI's libraries that this binary carries (built by build.rs) and loads
/// only for `--mpi`: the other commands start without MPI's libraries,
/// and need none installed.
#[cfg(gaspard_mpi)]
mod ffi {
    use std::ffi::{c_void, CStr, CString};
    use std::io::Write;
    use std::os::fd::FromRawFd;
    use std::sync::OnceLock;

    /// The shared object.
    static SHIM: &[u8] = include_bytes!(env!("GASPARD_MPI_SHIM"));

    type InitFn = unsafe extern "C" fn(rank: *mut i32, size: *mut i32) -> i32;
    type SendFn = unsafe extern "C" fn(to: i32, buf: *const u8, len: u64) -> i32;
    type RecvLenFn = unsafe extern "C" fn(from: i32, len: *mut u64) -> i32;
    type RecvFn = unsafe extern "C" fn(from: i32, buf: *mut u8, len: u64) -> i32;
    type FinalizeFn = unsafe extern "C" fn();
    type AbortFn = unsafe extern "C" fn(code: i32);

    /// Its functions.
    pub struct Calls {
        pub init: InitFn,
        pub send: SendFn,
        pub recv_len: RecvLenFn,
        pub recv: RecvFn,
        pub finalize: FinalizeFn,
        pub abort: AbortFn,
    }

    /// The functions, the shared object loaded on the first call.
    pub fn calls() -> Result<&'static Calls, String> {
        static CALLS: OnceLock<Result<Calls, String>> = OnceLock::new();
        CALLS.get_or_init(load).as_ref().map_err(Clone::clone)
    }

    fn dl_error() -> String {
        // SAFETY: dlerror returns NULL or a NUL-terminated message that
        // stays valid until the next dl call on this thread; copied at once.
        let e = unsafe { libc::dlerror() };
        if e.is_null() {
            "unknown error".into()
        } else {
            // SAFETY: checked non-null above; NUL-terminated by dlerror.
            unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
        }
    }

    fn load() -> Result<Calls, String> {
        // SAFETY: memfd_create with a NUL-terminated name and valid flags.
        let fd = unsafe { libc::memfd_create(c"gaspard-mpi".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(format!(
                "cannot load the MPI transport: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` was just created here and is owned by nobody else.
        let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
        file.write_all(SHIM)
            .map_err(|e| format!("cannot load the MPI transport: {e}"))?;
        let path = CString::new(format!("/proc/self/fd/{fd}")).map_err(|e| e.to_string())?;
        // SAFETY: loads the shared object written above; RTLD_GLOBAL so
        // that the components Open MPI loads find its libraries' symbols.
        let handle = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        drop(file);
        if handle.is_null() {
            return Err(format!(
                "MPI's libraries cannot be loaded ({}): --mpi needs the MPI gaspard was built with \
                 (Debian: openmpi-bin)",
                dl_error()
            ));
        }
        let sym = |name: &CStr| -> Result<*mut c_void, String> {
            // SAFETY: `handle` is a live handle from dlopen (never closed);
            // `name` is NUL-terminated.
            let p = unsafe { libc::dlsym(handle, name.as_ptr()) };
            if p.is_null() {
                Err(format!("the MPI transport lacks {name:?}: {}", dl_error()))
            } else {
                Ok(p)
            }
        };
        // SAFETY: csrc/mpi_transport.c defines each symbol with the
        // signature of its field; the object stays loaded for the process's
        // life.
        unsafe {
            Ok(Calls {
                init: std::mem::transmute::<*mut c_void, InitFn>(sym(c"gaspard_mpi_init")?),
                send: std::mem::transmute::<*mut c_void, SendFn>(sym(c"gaspard_mpi_send")?),
                recv_len: std::mem::transmute::<*mut c_void, RecvLenFn>(sym(
                    c"gaspard_mpi_recv_len",
                )?),
                recv: std::mem::transmute::<*mut c_void, RecvFn>(sym(c"gaspard_mpi_recv")?),
                finalize: std::mem::transmute::<*mut c_void, FinalizeFn>(sym(
                    c"gaspard_mpi_finalize",
                )?),
                abort: std::mem::transmute::<*mut c_void, AbortFn>(sym(c"gaspard_mpi_abort")?),
            })
        }
    }
}

/// This process's place in the MPI job.
pub struct Mpi {
    rank: usize,
    size: usize,
    #[cfg(gaspard_mpi)]
    calls: &'static ffi::Calls,
}

#[cfg(gaspard_mpi)]
impl Mpi {
    /// Starts MPI (`mpirun -np N gaspard report --mpi ...`; alone, a job of one).
    pub fn start() -> Result<Mpi> {
        let calls = ffi::calls().map_err(anyhow::Error::msg)?;
        let (mut rank, mut size) = (0i32, 0i32);
        // SAFETY: both pointers are to live i32s; called once, from the main thread.
        if unsafe { (calls.init)(&mut rank, &mut size) } != 0 || size < 1 || rank < 0 {
            bail!("MPI could not be started");
        }
        Ok(Mpi {
            rank: rank as usize,
            size: size as usize,
            calls,
        })
    }

    /// Ends MPI (every transfer of this rank is complete by then).
    pub fn finish(self) {
        // SAFETY: MPI was started by `start`; no transfer is outstanding.
        unsafe { (self.calls.finalize)() };
    }

    /// Ends the whole job at once (a rank that cannot go on would leave the
    /// others waiting for it).
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI was started by `start`.
        unsafe { (self.calls.abort)(code) };
        std::process::exit(code)
    }
}

#[cfg(not(gaspard_mpi))]
impl Mpi {
    /// Always an error: this gaspard was built without MPI.
    pub fn start() -> Result<Mpi> {
        bail!(
            "this gaspard was built without MPI (the `mpi` feature, with an MPI installation and its mpicc \
             at build time): --mpi is not available; run without it"
        )
    }
    /// Nothing to end.
    pub fn finish(self) {}
    /// Exits.
    pub fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

impl Transport for Mpi {
    fn rank(&self) -> usize {
        self.rank
    }
    fn size(&self) -> usize {
        self.size
    }
    #[cfg(gaspard_mpi)]
    fn send_to(&self, to: usize, bytes: &[u8]) -> Result<(), String> {
        // SAFETY: `bytes` is a live slice of `bytes.len()` bytes.
        match unsafe { (self.calls.send)(to as i32, bytes.as_ptr(), bytes.len() as u64) } {
            0 => Ok(()),
            _ => Err(format!("rank {}: sending to rank {to} failed", self.rank)),
        }
    }
    #[cfg(gaspard_mpi)]
    fn recv_from(&self, from: usize) -> Result<Vec<u8>, String> {
        let mut len = 0u64;
        // SAFETY: `len` is a live u64.
        if unsafe { (self.calls.recv_len)(from as i32, &mut len) } != 0 {
            return Err(format!("receiving from rank {from} failed"));
        }
        let mut buf = Vec::new();
        buf.try_reserve_exact(len as usize)
            .map_err(|_| format!("rank {from} sends {len} bytes: more than this rank can hold"))?;
        buf.resize(len as usize, 0);
        // SAFETY: `buf` holds exactly `len` bytes.
        if unsafe { (self.calls.recv)(from as i32, buf.as_mut_ptr(), len) } != 0 {
            return Err(format!("receiving from rank {from} failed"));
        }
        Ok(buf)
    }
    #[cfg(not(gaspard_mpi))]
    fn send_to(&self, _: usize, _: &[u8]) -> Result<(), String> {
        Err("built without MPI".into())
    }
    #[cfg(not(gaspard_mpi))]
    fn recv_from(&self, _: usize) -> Result<Vec<u8>, String> {
        Err("built without MPI".into())
    }
}
