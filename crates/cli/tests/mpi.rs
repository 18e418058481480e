//! MPI programs (Open MPI), C and Fortran, run as `gaspard run -- mpirun ...`
//! are recorded through the PMPI wrappers of libgaspard_mpi.so.

use std::path::Path;

use serde_json::Value;

mod common;
use common::{dump, events};

const C_PROGRAM: &str = r#"
#include <mpi.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int me, n;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  /* A ring of 800-byte messages. */
  double x[100] = {0};
  MPI_Request rq;
  MPI_Irecv(x, 100, MPI_DOUBLE, (me + n - 1) % n, 7, MPI_COMM_WORLD, &rq);
  MPI_Send(x, 100, MPI_DOUBLE, (me + 1) % n, 7, MPI_COMM_WORLD);
  MPI_Wait(&rq, MPI_STATUS_IGNORE);
  /* Reversed ranks: peers must come back as ranks of MPI_COMM_WORLD. */
  MPI_Comm rev;
  MPI_Comm_split(MPI_COMM_WORLD, 0, n - me, &rev);
  int rme;
  MPI_Comm_rank(rev, &rme);
  MPI_Bcast(x, 10, MPI_DOUBLE, 0, rev);   /* root 0 of rev is world rank n-1 */
  /* One-sided: a put to the right neighbour, an atomic on rank 0. */
  long *base; MPI_Win win;
  MPI_Win_allocate(8 * sizeof(long), sizeof(long), MPI_INFO_NULL, rev, &base, &win);
  MPI_Win_fence(0, win);
  long v = me;
  MPI_Put(&v, 1, MPI_LONG, (rme + 1) % n, 2, 1, MPI_LONG, win);
  MPI_Win_fence(0, win);
  MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
  long one = 1, old;
  MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 7, MPI_SUM, win);
  MPI_Win_unlock(0, win);
  MPI_Win_free(&win);
  MPI_Comm_free(&rev);
  double s = me, t;
  MPI_Allreduce(&s, &t, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return t == n * (n - 1) / 2 ? 0 : 3;
}
"#;

const F_PROGRAM: &str = r#"
program p
  use mpi
  implicit none
  integer :: ierr, me, n, i
  double precision :: x(50), s, t
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, me, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, n, ierr)
  x = me
  if (me == 0) call MPI_Send(x, 50, MPI_DOUBLE_PRECISION, 1, 3, MPI_COMM_WORLD, ierr)
  if (me == 1) call MPI_Recv(x, 50, MPI_DOUBLE_PRECISION, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  do i = 1, 3
    call MPI_Barrier(MPI_COMM_WORLD, ierr)
  end do
  s = me
  call MPI_Allreduce(s, t, 1, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
  call MPI_Finalize(ierr)
end program p
"#;

fn run(dir: &Path, exe: &Path, ranks: usize) -> Value {
    let np = ranks.to_string();
    let (trace, _) = common::gaspard_run(
        dir,
        &[
            "mpirun",
            "-np",
            &np,
            "--oversubscribe",
            exe.to_str().unwrap(),
        ],
    );
    dump(&trace)
}

/// The START events of `kind` in one rank's events.
fn starts<'a>(evs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    evs.iter()
        .filter(|e| e["kind"] == kind && e["phase"] == "START")
        .collect()
}

fn rank_of(evs: &[Value]) -> usize {
    let init = evs
        .iter()
        .find(|e| e["kind"] == "GASP_MPI_INIT" && e["phase"] == "END")
        .expect("MPI_Init recorded");
    init["args"]["rank"].as_u64().unwrap() as usize
}

fn c_program_on(n: usize) {
    let _alone = common::alone();
    let dir = common::tmpdir(&format!("mpi-c-{n}"));
    let exe = common::compile_with(&dir, "mpicc", "m.c", C_PROGRAM);
    let v = run(&dir, &exe, n);
    let ranks = events(&v);
    assert_eq!(ranks.len(), n, "one stream per rank");
    let mut seen = vec![false; n];
    for evs in &ranks {
        let me = rank_of(evs);
        seen[me] = true;
        let send = starts(evs, "GASP_MPI_SEND");
        assert_eq!(
            (
                send[0]["args"]["peer"].as_u64(),
                send[0]["args"]["nbytes"].as_u64()
            ),
            (Some(((me + 1) % n) as u64), Some(800))
        );
        let recv = starts(evs, "GASP_MPI_IRECV");
        assert_eq!(
            recv[0]["args"]["peer"].as_u64(),
            Some(((me + n - 1) % n) as u64)
        );
        assert_eq!(starts(evs, "GASP_MPI_WAIT").len(), 1);
        // Bcast on the reversed communicator: its root 0 is world rank n-1.
        let bcast = starts(evs, "GASP_MPI_BCAST");
        assert_eq!(
            (
                bcast[0]["args"]["root"].as_u64(),
                bcast[0]["args"]["nbytes"].as_u64()
            ),
            (Some((n - 1) as u64), Some(80))
        );
        // Put to rev rank (rme+1)%n where rme = n-1-me: world rank n-1-((n-me)%n).
        let rme = n - 1 - me;
        let target_world = n - 1 - (rme + 1) % n;
        let put = starts(evs, "GASP_MPI_PUT");
        assert_eq!(put[0]["args"]["target"].as_u64(), Some(target_world as u64));
        assert_eq!(
            (
                put[0]["args"]["disp"].as_u64(),
                put[0]["args"]["nbytes"].as_u64()
            ),
            (Some(2), Some(8))
        );
        let amo = starts(evs, "GASP_MPI_FETCH_AND_OP");
        assert_eq!(
            amo[0]["args"]["target"].as_u64(),
            Some((n - 1) as u64),
            "rev rank 0 is world rank n-1"
        );
        assert_eq!(starts(evs, "GASP_MPI_WIN_FENCE").len(), 2);
        assert_eq!(starts(evs, "GASP_MPI_WIN_LOCK").len(), 1);
        let free = evs
            .iter()
            .find(|e| e["kind"] == "GASP_MPI_WIN_FREE" && e["phase"] == "END")
            .unwrap();
        let alloc = evs
            .iter()
            .find(|e| e["kind"] == "GASP_MPI_WIN_ALLOCATE" && e["phase"] == "END")
            .unwrap();
        assert_eq!(
            free["args"]["win"], alloc["args"]["win"],
            "the window freed is the one allocated"
        );
        assert_eq!(alloc["args"]["size"], 64);
        assert_eq!(
            starts(evs, "GASP_MPI_ALLREDUCE")[0]["args"]["comm_size"].as_u64(),
            Some(n as u64)
        );
    }
    assert!(seen.iter().all(|s| *s), "every rank recorded");
}

#[test]
fn mpi_c_program_on_2_ranks() {
    c_program_on(2);
}

#[test]
fn mpi_c_program_on_4_ranks() {
    c_program_on(4);
}

#[test]
fn mpi_fortran_program_is_recorded() {
    let _alone = common::alone();
    let dir = common::tmpdir("mpi-f");
    let exe = common::compile_with(&dir, "mpifort", "f.f90", F_PROGRAM);
    let v = run(&dir, &exe, 2);
    let ranks = events(&v);
    assert_eq!(ranks.len(), 2);
    for evs in &ranks {
        let me = rank_of(evs);
        assert_eq!(starts(evs, "GASP_MPI_BARRIER").len(), 3);
        assert_eq!(starts(evs, "GASP_MPI_ALLREDUCE")[0]["args"]["nbytes"], 8);
        if me == 0 {
            let s = starts(evs, "GASP_MPI_SEND");
            assert_eq!(
                (
                    s[0]["args"]["peer"].as_u64(),
                    s[0]["args"]["tag"].as_u64(),
                    s[0]["args"]["nbytes"].as_u64()
                ),
                (Some(1), Some(3), Some(400))
            );
        } else {
            assert_eq!(starts(evs, "GASP_MPI_RECV")[0]["args"]["peer"], 0);
        }
    }
}

/// A reduction of one value per iteration, thousands of times: a
/// `small_messages` finding whose advice fits a collective (combine the
/// values, reduce less often, overlap with MPI_Iallreduce), not the packing
/// into one message or one MPI_Put that fits point-to-point transfers.
const REDUCTIONS: &str = r#"
#include <mpi.h>
int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  double x = 1.0, sum = 0.0;
  for (int i = 0; i < 5000; i++)
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); /* each step */
  MPI_Finalize();
  return sum > 0.0 ? 0 : 1;
}
"#;

#[test]
fn many_small_reductions_get_a_collective_advice() {
    // Its ranks' arrivals are timed: the other MPI runs of this file wait.
    let _alone = common::alone();
    let dir = common::tmpdir("mpi-reductions");
    let exe = common::compile_with(&dir, "mpicc", "r.c", REDUCTIONS);
    let (trace, _) = common::gaspard_run(
        &dir,
        &[
            "mpirun",
            "-np",
            "2",
            "--oversubscribe",
            exe.to_str().unwrap(),
        ],
    );
    let r = common::report(&trace);
    let small: Vec<&Value> = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "small_messages")
        .collect();
    assert_eq!(small.len(), 1, "{:#}", r["findings"]);
    let line = REDUCTIONS
        .lines()
        .position(|l| l.contains("each step"))
        .unwrap()
        + 1;
    assert_eq!(small[0]["location"]["line"], line);
    let msg = small[0]["message"].as_str().unwrap();
    assert!(msg.contains("10000 GASP_MPI_ALLREDUCE of 8 bytes"), "{msg}");
    assert!(msg.contains("MPI_Iallreduce"), "{msg}");
    assert!(!msg.contains("MPI_Put"), "{msg}");
    // Ranks doing the same work arrive at each reduction a few tens of ns
    // apart (its own latency): listed in the waits, not a finding.
    let w = r["waits"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["pattern"] == "collective" && w["location"]["line"] == line)
        .unwrap_or_else(|| panic!("{:#}", r["waits"]));
    assert_eq!(w["calls"], 10000, "{w}");
    assert!(
        !r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["kind"] == "barrier_wait"),
        "{:#}",
        r["findings"]
    );
}
