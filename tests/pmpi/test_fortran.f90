! SPDX-License-Identifier: Apache-2.0
!
! Fortran (`use mpi`) through the layer: Open MPI's Fortran bindings call
! PMPI directly, so these calls only reach ACCL through the layer's own
! mpi_*_ entry points. Checks results, statuses, MPI_IN_PLACE (a Fortran
! sentinel) and request handles; the ACCL_STATS table (checked by the test
! runner) proves the calls were offloaded.
program test_fortran
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, i, half, hrank, hsize, provided
  integer :: failures, total
  integer, parameter :: n = 1000
  real :: a(n), b(n)
  double precision :: d(n), e(n)
  integer :: ia(n), ib(n), status(MPI_STATUS_SIZE), cnt
  integer :: reqs(2), statuses(MPI_STATUS_SIZE, 2)
  integer, allocatable :: sendv(:), recvv(:)

  failures = 0
  call MPI_Init_thread(MPI_THREAD_FUNNELED, provided, ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)

  ! allreduce, real and double, plain and in place
  do i = 1, n
    a(i) = real(rank + i)
    d(i) = dble(rank * i)
  end do
  call MPI_Allreduce(a, b, n, MPI_REAL, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (b(i) /= real(nprocs * i + nprocs * (nprocs - 1) / 2)) failures = failures + 1
  end do
  e = d
  call MPI_Allreduce(MPI_IN_PLACE, e, n, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
  do i = 1, n
    if (e(i) /= dble((nprocs - 1) * i)) failures = failures + 1
  end do
  if (ierr /= MPI_SUCCESS) failures = failures + 1

  ! reduce to the last rank, in place there
  ia = rank + 1
  if (rank == nprocs - 1) then
    call MPI_Reduce(MPI_IN_PLACE, ia, n, MPI_INTEGER, MPI_SUM, nprocs - 1, MPI_COMM_WORLD, ierr)
    if (any(ia /= nprocs * (nprocs + 1) / 2)) failures = failures + 1
  else
    call MPI_Reduce(ia, ib, n, MPI_INTEGER, MPI_SUM, nprocs - 1, MPI_COMM_WORLD, ierr)
  end if

  ! bcast
  if (rank == 0) ia = 42
  call MPI_Bcast(ia, n, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (any(ia /= 42)) failures = failures + 1

  ! send / recv with status
  if (nprocs > 1) then
    if (rank == 0) then
      ia = 7
      call MPI_Send(ia, 17, MPI_INTEGER, 1, 99, MPI_COMM_WORLD, ierr)
    else if (rank == 1) then
      ib = 0
      call MPI_Recv(ib, n, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
      call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
      if (cnt /= 17 .or. status(MPI_SOURCE) /= 0 .or. status(MPI_TAG) /= 99) failures = failures + 1
      if (any(ib(1:17) /= 7)) failures = failures + 1
    end if
  end if

  ! isend / irecv ring + waitall
  ia = rank
  call MPI_Irecv(ib, n, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(ia, n, MPI_INTEGER, mod(rank + 1, nprocs), 5, MPI_COMM_WORLD, reqs(2), ierr)
  call MPI_Waitall(2, reqs, statuses, ierr)
  if (any(ib /= mod(rank + nprocs - 1, nprocs))) failures = failures + 1
  if (statuses(MPI_SOURCE, 1) /= mod(rank + nprocs - 1, nprocs)) failures = failures + 1
  if (reqs(1) /= MPI_REQUEST_NULL .or. reqs(2) /= MPI_REQUEST_NULL) failures = failures + 1

  ! a split communicator
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), rank, half, ierr)
  call MPI_Comm_rank(half, hrank, ierr)
  call MPI_Comm_size(half, hsize, ierr)
  ia = 1
  call MPI_Allreduce(ia, ib, n, MPI_INTEGER, MPI_SUM, half, ierr)
  if (any(ib /= hsize)) failures = failures + 1

  ! alltoall and gather on it
  allocate(sendv(hsize), recvv(hsize))
  do i = 1, hsize
    sendv(i) = hrank * 100 + i
  end do
  call MPI_Alltoall(sendv, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, half, ierr)
  do i = 1, hsize
    if (recvv(i) /= (i - 1) * 100 + hrank + 1) failures = failures + 1
  end do
  call MPI_Gather(hrank, 1, MPI_INTEGER, recvv, 1, MPI_INTEGER, 0, half, ierr)
  if (hrank == 0) then
    do i = 1, hsize
      if (recvv(i) /= i - 1) failures = failures + 1
    end do
  end if
  call MPI_Barrier(half, ierr)
  call MPI_Comm_free(half, ierr)

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(A)', 'test_fortran: passed'
    else
      print '(A,I0,A)', 'test_fortran: FAILED (', total, ' failures)'
    end if
  end if
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1
end program test_fortran
