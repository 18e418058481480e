//! `gaspard report --mpi`: the ranks of an MPI job share the reading of a
//! trace ([`gaspard_analyze::distributed`]); rank 0 prints the report.

use anyhow::{bail, Result};
use gaspard_analyze::distributed::Transport;

#[cfg(gaspard_mpi)]
mod ffi {
    extern "C" {
        pub fn gaspard_mpi_init(rank: *mut i32, size: *mut i32) -> i32;
        pub fn gaspard_mpi_send(to: i32, buf: *const u8, len: u64) -> i32;
        pub fn gaspard_mpi_recv_len(from: i32, len: *mut u64) -> i32;
        pub fn gaspard_mpi_recv(from: i32, buf: *mut u8, len: u64) -> i32;
        pub fn gaspard_mpi_finalize();
        pub fn gaspard_mpi_abort(code: i32);
    }
}

/// This process's place in the MPI job.
pub struct Mpi {
    rank: usize,
    size: usize,
}

#[cfg(gaspard_mpi)]
impl Mpi {
    /// Starts MPI (`mpirun -np N gaspard report --mpi ...`; alone, a job of one).
    pub fn start() -> Result<Mpi> {
        let (mut rank, mut size) = (0i32, 0i32);
        // SAFETY: both pointers are to live i32s; called once, from the main thread.
        if unsafe { ffi::gaspard_mpi_init(&mut rank, &mut size) } != 0 || size < 1 || rank < 0 {
            bail!("MPI could not be started");
        }
        Ok(Mpi {
            rank: rank as usize,
            size: size as usize,
        })
    }

    /// Ends MPI (every transfer of this rank is complete by then).
    pub fn finish(self) {
        // SAFETY: MPI was started by `start`; no transfer is outstanding.
        unsafe { ffi::gaspard_mpi_finalize() };
    }

    /// Ends the whole job at once (a rank that cannot go on would leave the
    /// others waiting for it).
    pub fn abort(&self, code: i32) -> ! {
        // SAFETY: MPI was started by `start`.
        unsafe { ffi::gaspard_mpi_abort(code) };
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
        match unsafe { ffi::gaspard_mpi_send(to as i32, bytes.as_ptr(), bytes.len() as u64) } {
            0 => Ok(()),
            _ => Err(format!("rank {}: sending to rank {to} failed", self.rank)),
        }
    }
    #[cfg(gaspard_mpi)]
    fn recv_from(&self, from: usize) -> Result<Vec<u8>, String> {
        let mut len = 0u64;
        // SAFETY: `len` is a live u64.
        if unsafe { ffi::gaspard_mpi_recv_len(from as i32, &mut len) } != 0 {
            return Err(format!("receiving from rank {from} failed"));
        }
        let mut buf = Vec::new();
        buf.try_reserve_exact(len as usize)
            .map_err(|_| format!("rank {from} sends {len} bytes: more than this rank can hold"))?;
        buf.resize(len as usize, 0);
        // SAFETY: `buf` holds exactly `len` bytes.
        if unsafe { ffi::gaspard_mpi_recv(from as i32, buf.as_mut_ptr(), len) } != 0 {
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
