! Time per remote coarray read (one integer from the next image), in ns:
!   caf -O2 -g bench/caf_get.f90 -o caf_get && cafrun -np 2 ./caf_get
program g
  implicit none
  integer :: a[*], s, i, n
  integer(8) :: t0, t1, rate
  a = this_image()
  n = 20000
  s = 0
  sync all
  call system_clock(t0, rate)
  do i = 1, n
    s = s + a[mod(this_image(), num_images()) + 1]
  end do
  call system_clock(t1)
  sync all
  if (this_image() == 1) print '(F10.2)', real(t1 - t0, 8) / rate * 1d9 / n
  if (s < 0) print *, s
end program g
