! SPDX-License-Identifier: Apache-2.0
!
! Fortran (`use mpi`) through the layer: Open MPI's Fortran bindings call
! PMPI directly, so these calls only reach ACCL through the layer's own
! mpi_*_ entry points. Checks results, statuses, MPI_IN_PLACE (a Fortran
! sentinel) and request handles (new ones, ones completed by waitsome and
! testsome, persistent ones started and freed); the ACCL_STATS table
! (checked by the test runner) proves the calls were offloaded.
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
  integer :: dup, left, right, iter, done, outcount
  integer :: creqs(3), indices(3), cstatuses(MPI_STATUS_SIZE, 3), preqs(2)
  integer :: ic(n)
  integer, allocatable :: gathered(:)
  double precision :: t0

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
      status(MPI_ERROR) = 777  ! a single completion leaves it alone (MPI 3.1 3.2.5)
      call MPI_Recv(ib, n, MPI_INTEGER, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, status, ierr)
      call MPI_Get_count(status, MPI_INTEGER, cnt, ierr)
      if (cnt /= 17 .or. status(MPI_SOURCE) /= 0 .or. status(MPI_TAG) /= 99) failures = failures + 1
      if (status(MPI_ERROR) /= 777) failures = failures + 1
      if (any(ib(1:17) /= 7)) failures = failures + 1
    end if
  end if

  ! isend / irecv ring + waitall
  ia = rank
  call MPI_Irecv(ib, n, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 5, MPI_COMM_WORLD, reqs(1), ierr)
  call MPI_Isend(ia, n, MPI_INTEGER, mod(rank + 1, nprocs), 5, MPI_COMM_WORLD, reqs(2), ierr)
  statuses(MPI_ERROR, :) = 777  ! written only with MPI_ERR_IN_STATUS
  call MPI_Waitall(2, reqs, statuses, ierr)
  if (any(ib /= mod(rank + nprocs - 1, nprocs))) failures = failures + 1
  if (statuses(MPI_SOURCE, 1) /= mod(rank + nprocs - 1, nprocs)) failures = failures + 1
  if (any(statuses(MPI_ERROR, :) /= 777)) failures = failures + 1
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

  ! Handles the wrappers create or update: a duplicated communicator,
  ! non-blocking collectives completed by waitsome and testsome (indices are
  ! 1-based, completed requests come back as MPI_REQUEST_NULL), persistent
  ! requests started twice, then freed.
  call MPI_Comm_dup(MPI_COMM_WORLD, dup, ierr)
  if (ierr /= MPI_SUCCESS .or. dup == MPI_COMM_NULL) failures = failures + 1
  allocate(gathered(nprocs))
  ia = rank + 1
  ic = 0
  if (rank == 0) ic = 9
  call MPI_Iallreduce(ia, ib, n, MPI_INTEGER, MPI_SUM, dup, creqs(1), ierr)
  call MPI_Ibcast(ic, n, MPI_INTEGER, 0, dup, creqs(2), ierr)
  call MPI_Igather(rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, 0, dup, creqs(3), ierr)
  done = 0
  do while (done < 3)
    call MPI_Waitsome(3, creqs, outcount, indices, cstatuses, ierr)
    if (ierr /= MPI_SUCCESS .or. outcount < 1 .or. outcount == MPI_UNDEFINED) then
      failures = failures + 1
      exit
    end if
    do i = 1, outcount
      if (indices(i) < 1 .or. indices(i) > 3) then
        failures = failures + 1
      else if (creqs(indices(i)) /= MPI_REQUEST_NULL) then
        failures = failures + 1
      end if
    end do
    done = done + outcount
  end do
  if (any(ib /= nprocs * (nprocs + 1) / 2)) failures = failures + 1
  if (any(ic /= 9)) failures = failures + 1
  if (rank == 0) then
    do i = 1, nprocs
      if (gathered(i) /= i - 1) failures = failures + 1
    end do
  end if

  call MPI_Iallgather(rank, 1, MPI_INTEGER, gathered, 1, MPI_INTEGER, dup, creqs(1), ierr)
  call MPI_Ibarrier(dup, creqs(2), ierr)
  done = 0
  t0 = MPI_Wtime()
  do while (done < 2)
    if (MPI_Wtime() - t0 > 30d0) exit  ! bounded: the waitall below completes what is left
    call MPI_Testsome(2, creqs(1:2), outcount, indices, cstatuses, ierr)
    if (ierr /= MPI_SUCCESS .or. outcount == MPI_UNDEFINED) exit
    do i = 1, outcount
      if (indices(i) < 1 .or. indices(i) > 2) failures = failures + 1
    end do
    done = done + outcount
  end do
  if (done /= 2) then
    failures = failures + 1
    call MPI_Waitall(2, creqs(1:2), cstatuses, ierr)
  end if
  if (any(creqs(1:2) /= MPI_REQUEST_NULL)) failures = failures + 1
  do i = 1, nprocs
    if (gathered(i) /= i - 1) failures = failures + 1
  end do

  left = mod(rank + nprocs - 1, nprocs)
  right = mod(rank + 1, nprocs)
  call MPI_Recv_init(ib, n, MPI_INTEGER, left, 6, dup, preqs(1), ierr)
  call MPI_Send_init(ia, n, MPI_INTEGER, right, 6, dup, preqs(2), ierr)
  do iter = 1, 2
    ia = rank * 10 + iter
    call MPI_Start(preqs(1), ierr)
    call MPI_Start(preqs(2), ierr)
    call MPI_Waitall(2, preqs, statuses, ierr)
    if (any(ib /= left * 10 + iter)) failures = failures + 1
    if (any(preqs == MPI_REQUEST_NULL)) failures = failures + 1  ! persistent requests stay allocated
  end do
  call MPI_Request_free(preqs(1), ierr)
  call MPI_Request_free(preqs(2), ierr)
  if (any(preqs /= MPI_REQUEST_NULL)) failures = failures + 1
  call MPI_Comm_free(dup, ierr)

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
