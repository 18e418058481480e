! A 1-D Jacobi iteration on coarrays: each image owns a block, reads its
! neighbours' edge cells, and the images synchronize every step; the
! residual is summed with co_sum.
!
!   caf -g jacobi.f90 -o jacobi && gaspard run -- cafrun -np 4 ./jacobi
program jacobi
  implicit none
  integer, parameter :: n = 1024, steps = 50
  double precision :: u(0:n+1)[*], v(n), res
  integer :: me, np, s
  me = this_image(); np = num_images()
  u = 0
  if (me == 1) u(1) = 1000
  sync all
  do s = 1, steps
    if (me > 1) u(0) = u(n)[me - 1]
    if (me < np) u(n + 1) = u(1)[me + 1]
    v = u(1:n) + 0.25d0 * (u(0:n-1) - 2 * u(1:n) + u(2:n+1))
    res = sum((v - u(1:n))**2)
    sync all
    u(1:n) = v
    sync all
  end do
  call co_sum(res)
  if (me == 1) print '(a,i0,a,i0,a,es10.3)', "jacobi: ", steps, " steps on ", np, " images, residual ", res
end program jacobi
