! Modified Gram-Schmidt on coarrays, in the five versions of the SVMview case
! study (Section 6 of INRIA RR-2774): see README.md in this directory.
!
! The matrix of m vectors of n doubles is one shared array of m*n doubles,
! stored vector after vector and distributed block-cyclically in pages of
! 1024 doubles (8192 bytes, the page of the paper): global page b lives on
! image b mod P + 1, in column b / P + 1 of the coarray v(1024, npl)[*].
!
!   caf -g -O2 mgs_caf.f90 -o mgs_caf
!   cafrun -np 4 --oversubscribe ./mgs_caf VERSION [M [REPS]]
!
! VERSION 1..5; M vectors (default 128); REPS repeats the dot-product and
! update arithmetic (default 100) without changing the communication.
! Image 1 prints the orthogonality error of the result; the exit status is 0
! only if it is below 1e-8.
module mgs_shared
  implicit none
  integer, parameter :: page = 1024   ! doubles per page: 8192 bytes
  real(8), allocatable :: v(:, :)[:]  ! this image's pages of the shared matrix
  integer :: me, np                   ! me counts from 0, like a PE
  real(8), volatile :: sink           ! the compiler must redo each repetition

  ! The broadcast buffer of versions 3-5, a scalar holding the longest vector:
  ! OpenCoarrays broadcasts a scalar in one MPI_Bcast, but an array in one
  ! MPI_Bcast per element.
  type :: vector_t
    real(8) :: x(page + 1)
  end type vector_t

contains

  ! Reads count doubles of the shared matrix from global element g (from 0)
  ! on into the private buffer dst. The range is split at page boundaries and
  ! each piece is one coindexed array-section read from the image holding the
  ! page, EVEN WHEN that image is this one: like a UPC runtime handling an
  ! access through a pointer-to-shared, every access to the shared matrix
  ! goes through the coarray runtime.
  subroutine gget(dst, g, count)
    real(8), intent(inout) :: dst(*)
    integer(8), intent(in) :: g, count
    integer(8) :: at, c, d, off, len, pg
    at = g; c = count; d = 1
    do while (c > 0)
      pg = at / page; off = mod(at, int(page, 8)); len = min(page - off, c)
      dst(d:d + len - 1) = v(off + 1:off + len, pg / np + 1)[int(mod(pg, int(np, 8))) + 1]
      d = d + len; at = at + len; c = c - len
    end do
  end subroutine gget

  ! Writes count doubles to the shared matrix from global element g on, one
  ! coindexed array-section assignment per page piece, this image's pages
  ! included (see gget).
  subroutine gput(g, src, count)
    integer(8), intent(in) :: g, count
    real(8), intent(in) :: src(*)
    integer(8) :: at, c, s, off, len, pg
    at = g; c = count; s = 1
    do while (c > 0)
      pg = at / page; off = mod(at, int(page, 8)); len = min(page - off, c)
      v(off + 1:off + len, pg / np + 1)[int(mod(pg, int(np, 8))) + 1] = src(s:s + len - 1)
      s = s + len; at = at + len; c = c - len
    end do
  end subroutine gput

  real(8) function dot(a, b, n, reps)
    integer, intent(in) :: n, reps
    real(8), intent(in) :: a(n), b(n)
    integer :: r, k
    real(8) :: s
    s = 0
    do r = 1, reps
      s = 0
      do k = 1, n
        s = s + a(k) * b(k)
      end do
      sink = s
    end do
    dot = s
  end function dot

  ! w = vj - t * vi, computed reps times.
  subroutine update(w, vj, vi, t, n, reps)
    integer, intent(in) :: n, reps
    real(8), intent(out) :: w(n)
    real(8), intent(in) :: vj(n), vi(n), t
    integer :: r, k
    do r = 1, reps
      do k = 1, n
        w(k) = vj(k) - t * vi(k)
      end do
      sink = w(1 + mod(r, n))
    end do
  end subroutine update

  subroutine normalize(x, n)
    integer, intent(in) :: n
    real(8), intent(inout) :: x(n)
    x = x * (1d0 / sqrt(sum(x * x)))
  end subroutine normalize

  ! The image (from 0) in charge of vector j (from 0): CYCLIC affinity
  ! (versions 2-4) or BLOCK affinity (versions 1 and 5; version 1 uses it
  ! only to initialize).
  integer function owner(version, j, m)
    integer, intent(in) :: version, j, m
    if (version == 1 .or. version == 5) then
      owner = j / ((m + np - 1) / np)
    else
      owner = mod(j, np)
    end if
  end function owner

end module mgs_shared

program mgs
  use mgs_shared
  implicit none
  integer :: version, m, reps, n, i, j, k, lo, hi, chunk, cnt, root, a, b
  integer(8) :: total, pages, npl, c0, c1, rate
  real(8), allocatable :: vi(:), vj(:), w(:), q(:, :)
  type(vector_t) :: buf
  real(8) :: t, err, e
  logical :: got, ok
  character(len=16) :: errtext, timetext

  me = this_image() - 1
  np = num_images()
  version = int_arg(1, 0)
  m = int_arg(2, 128)
  reps = int_arg(3, 100)
  if (version < 1 .or. version > 5 .or. m < 1 .or. reps < 1) then
    if (me == 0) write (0, '(a)') 'usage: mgs_caf VERSION(1..5) [M>0 [REPS>0]]'
    stop 2
  end if
  n = merge(1024, 1025, version <= 3)   ! 1025: two vectors share a page
  total = int(m, 8) * n
  pages = (total + page - 1) / page
  npl = (pages + np - 1) / np
  allocate (v(page, npl)[*])
  allocate (vi(n), vj(n), w(n))

  ! A diagonally dominant matrix (n on the diagonal, [0,1) elsewhere), well
  ! conditioned, so MGS stays accurate; each image writes the vectors it owns.
  do j = 0, m - 1
    if (owner(version, j, m) /= me) cycle
    do k = 0, n - 1
      vj(k + 1) = merge(real(n, 8), 0d0, k == j) + mod(k * 7 + j * 13, 101) / 101d0
    end do
    call gput(int(j, 8) * n, vj, int(n, 8))
  end do
  sync all

  call system_clock(c0, rate)
  do i = 0, m - 1
    select case (version)
    case (1)
      ! Sequential section on image 1, then the j loop split in P blocks.
      if (me == 0) then
        call gget(vi, int(i, 8) * n, int(n, 8))
        call normalize(vi, n)
        call gput(int(i, 8) * n, vi, int(n, 8))
      end if
      sync all
      cnt = m - 1 - i
      chunk = (cnt + np - 1) / np
      lo = i + 1 + me * chunk
      hi = min(lo + chunk, m)
      if (lo < hi) call gget(vi, int(i, 8) * n, int(n, 8))
      do j = lo, hi - 1
        call gget(vj, int(j, 8) * n, int(n, 8))
        t = dot(vi, vj, n, reps)
        call update(w, vj, vi, t, n, reps)
        call gput(int(j, 8) * n, w, int(n, 8))
      end do
      sync all
    case (2)
      ! Affinity: the owner of vector i normalizes it; every image then
      ! reads it from the shared matrix (the producer-consumer read).
      if (owner(version, i, m) == me) then
        call gget(vi, int(i, 8) * n, int(n, 8))
        call normalize(vi, n)
        call gput(int(i, 8) * n, vi, int(n, 8))
      end if
      sync all
      got = .false.
      do j = i + 1, m - 1
        if (owner(version, j, m) /= me) cycle
        if (.not. got) then
          call gget(vi, int(i, 8) * n, int(n, 8))
          got = .true.
        end if
        call gget(vj, int(j, 8) * n, int(n, 8))
        t = dot(vi, vj, n, reps)
        call update(w, vj, vi, t, n, reps)
        call gput(int(j, 8) * n, w, int(n, 8))
      end do
      sync all
    case default
      ! Versions 3-5: the owner normalizes vector i, writes it back and
      ! broadcasts it; no sync before the j loop, which uses the copy.
      root = owner(version, i, m)
      if (root == me) then
        call gget(buf%x, int(i, 8) * n, int(n, 8))
        call normalize(buf%x, n)
        call gput(int(i, 8) * n, buf%x, int(n, 8))
      end if
      call co_broadcast(buf, source_image=root + 1)
      do j = i + 1, m - 1
        if (owner(version, j, m) /= me) cycle
        call gget(vj, int(j, 8) * n, int(n, 8))
        t = dot(buf%x, vj, n, reps)
        call update(w, vj, buf%x, t, n, reps)
        call gput(int(j, 8) * n, w, int(n, 8))
      end do
      sync all
    end select
  end do
  call system_clock(c1)

  ok = .true.
  if (me == 0) then
    ! max |<q_a,q_b> - delta_ab| over all pairs, from the gathered result.
    allocate (q(n, m))
    do j = 0, m - 1
      call gget(q(:, j + 1), int(j, 8) * n, int(n, 8))
    end do
    err = 0
    do a = 1, m
      do b = a, m
        e = abs(dot(q(:, a), q(:, b), n, 1) - merge(1d0, 0d0, a == b))
        if (e > err .or. e /= e) err = e
      end do
    end do
    write (errtext, '(es9.1e2)') err
    errtext = adjustl(errtext)
    k = index(errtext, 'E')
    if (k > 0) errtext(k:k) = 'e'
    write (timetext, '(f12.2)') real(c1 - c0, 8) / rate
    write (*, '(a,i0,a,i0,a,i0,a,i0,5a)') 'mgs v', version, ' m=', m, ' n=', n, ' P=', np, &
      ' orthogonality_error=', trim(errtext), ' time=', trim(adjustl(timetext)), 's'
    ok = err < 1d-8
    deallocate (q)
  end if
  sync all
  deallocate (vi, vj, w)
  deallocate (v)
  if (.not. ok) stop 1

contains

  ! The integer command argument number pos, or def when it is absent.
  integer function int_arg(pos, def)
    integer, intent(in) :: pos, def
    character(len=32) :: text
    integer :: st
    int_arg = def
    call get_command_argument(pos, text, status=st)
    if (st /= 0 .or. len_trim(text) == 0) return
    read (text, *, iostat=st) int_arg
    if (st /= 0) int_arg = -1
  end function int_arg

end program mgs
