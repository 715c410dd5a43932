! SPDX-License-Identifier: Apache-2.0
!
! The v-collectives, scans and unequal reduce_scatter through the layer's
! Fortran entry points (`use mpi`; Open MPI's own bindings would call PMPI
! and bypass the layer): MPI_Allgatherv, MPI_Gatherv, MPI_Scatterv,
! MPI_Alltoallv, MPI_Scan, MPI_Exscan, MPI_Reduce_scatter and their MPI_I*
! forms, plain and MPI_IN_PLACE, with zero counts and displacements laid out
! backwards with gaps (which must stay untouched). Every element is checked;
! the test runner checks the ACCL_STATS rows.
program test_fortran_vcoll
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, failures, total, p, i, root, req, variant
  integer :: n
  integer, allocatable :: counts(:), displs(:), scounts(:), sdispls(:), rcounts(:), rdispls(:)
  integer, allocatable :: sbuf(:), rbuf(:), want(:)
  double precision, allocatable :: dsend(:), drecv(:)
  logical :: in_place, nonblocking

  failures = 0
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  allocate(counts(0:nprocs - 1), displs(0:nprocs - 1), scounts(0:nprocs - 1), sdispls(0:nprocs - 1))
  allocate(rcounts(0:nprocs - 1), rdispls(0:nprocs - 1))

  do variant = 0, 3
    in_place = mod(variant, 2) == 1
    nonblocking = variant >= 2

    ! --- allgatherv: block p holds item_of(p, i) ---
    do p = 0, nprocs - 1
      counts(p) = block_count(p, variant, 700)
    end do
    n = backwards(counts, displs)
    allocate(rbuf(n), want(n), sbuf(max(1, counts(rank))))
    call expected_blocks(want, counts, displs, -1)
    rbuf = -1
    do i = 1, counts(rank)
      sbuf(i) = item_of(rank, -1, i)
    end do
    if (in_place) then
      rbuf(displs(rank) + 1:displs(rank) + counts(rank)) = sbuf(1:counts(rank))
      if (nonblocking) then
        call MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, &
                             req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      else
        call MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
      end if
    else
      if (nonblocking) then
        call MPI_Iallgatherv(sbuf, counts(rank), MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, &
                             req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      else
        call MPI_Allgatherv(sbuf, counts(rank), MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, MPI_COMM_WORLD, ierr)
      end if
    end if
    call expect(all(rbuf == want), 'allgatherv', variant)

    ! --- gatherv to the last rank ---
    root = nprocs - 1
    call expected_blocks(want, counts, displs, root)
    do i = 1, counts(rank)
      sbuf(i) = item_of(rank, root, i)
    end do
    rbuf = -1
    if (in_place .and. rank == root) then
      rbuf(displs(rank) + 1:displs(rank) + counts(rank)) = sbuf(1:counts(rank))
      if (nonblocking) then
        call MPI_Igatherv(MPI_IN_PLACE, 0, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, root, MPI_COMM_WORLD, &
                          req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      else
        call MPI_Gatherv(MPI_IN_PLACE, 0, MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      end if
    else if (nonblocking) then
      call MPI_Igatherv(sbuf, counts(rank), MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, root, MPI_COMM_WORLD, &
                        req, ierr)
      call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    else
      call MPI_Gatherv(sbuf, counts(rank), MPI_INTEGER, rbuf, counts, displs, MPI_INTEGER, root, MPI_COMM_WORLD, &
                       ierr)
    end if
    if (rank == root) then
      call expect(all(rbuf == want), 'gatherv at the root', variant)
    else
      call expect(all(rbuf == -1), 'gatherv off the root (untouched)', variant)
    end if

    ! --- scatterv from rank 0: block p holds item_of(0, p, i) ---
    root = 0
    do p = 0, nprocs - 1
      do i = 1, counts(p)
        want(displs(p) + i) = item_of(root, p, i)
      end do
    end do
    sbuf = -1
    if (in_place .and. rank == root) then
      if (nonblocking) then
        call MPI_Iscatterv(want, counts, displs, MPI_INTEGER, MPI_IN_PLACE, 0, MPI_INTEGER, root, MPI_COMM_WORLD, &
                           req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      else
        call MPI_Scatterv(want, counts, displs, MPI_INTEGER, MPI_IN_PLACE, 0, MPI_INTEGER, root, MPI_COMM_WORLD, ierr)
      end if
      call expect(all(sbuf == -1), 'scatterv in place (receive buffer untouched)', variant)
    else
      if (nonblocking) then
        call MPI_Iscatterv(want, counts, displs, MPI_INTEGER, sbuf, counts(rank), MPI_INTEGER, root, &
                           MPI_COMM_WORLD, req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      else
        call MPI_Scatterv(want, counts, displs, MPI_INTEGER, sbuf, counts(rank), MPI_INTEGER, root, MPI_COMM_WORLD, &
                          ierr)
      end if
      do i = 1, counts(rank)
        call expect(sbuf(i) == item_of(root, rank, i), 'scatterv', variant)
      end do
    end if
    deallocate(rbuf, want, sbuf)

    ! --- alltoallv: rank a sends item_of(a, b, i) to b (symmetric counts in place) ---
    do p = 0, nprocs - 1
      scounts(p) = pair_count(rank, p, in_place)
      rcounts(p) = pair_count(p, rank, in_place)
    end do
    n = max(backwards(scounts, sdispls), backwards(rcounts, rdispls))
    allocate(sbuf(n), rbuf(n), want(n))
    sbuf = -1
    rbuf = -1
    want = -1
    do p = 0, nprocs - 1
      do i = 1, scounts(p)
        sbuf(sdispls(p) + i) = item_of(rank, p, i)
      end do
      do i = 1, rcounts(p)
        want(rdispls(p) + i) = item_of(p, rank, i)
      end do
    end do
    if (in_place) then
      do p = 0, nprocs - 1
        do i = 1, rcounts(p)
          rbuf(rdispls(p) + i) = item_of(rank, p, i)
        end do
      end do
      if (nonblocking) then
        call MPI_Ialltoallv(MPI_IN_PLACE, scounts, sdispls, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, &
                            MPI_COMM_WORLD, req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      else
        call MPI_Alltoallv(MPI_IN_PLACE, scounts, sdispls, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, &
                           MPI_COMM_WORLD, ierr)
      end if
    else if (nonblocking) then
      call MPI_Ialltoallv(sbuf, scounts, sdispls, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, &
                          MPI_COMM_WORLD, req, ierr)
      call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    else
      call MPI_Alltoallv(sbuf, scounts, sdispls, MPI_INTEGER, rbuf, rcounts, rdispls, MPI_INTEGER, MPI_COMM_WORLD, &
                         ierr)
    end if
    call expect(all(rbuf == want), 'alltoallv', variant)
    deallocate(sbuf, rbuf, want)

    ! --- scan and exscan: integer SUM and PROD, double MAX and MIN ---
    call scans(variant, 1000)

    ! --- reduce_scatter, counts p + 1 (unequal when nprocs > 1) ---
    do p = 0, nprocs - 1
      counts(p) = p + 1 + 50 * variant
    end do
    total = sum(counts)
    allocate(dsend(total), drecv(total))
    do i = 1, total
      dsend(i) = dble(rank + i)
    end do
    drecv = -1d0
    if (in_place) then
      drecv = dsend
      call MPI_Reduce_scatter(MPI_IN_PLACE, drecv, counts, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    else if (nonblocking) then
      call MPI_Ireduce_scatter(dsend, drecv, counts, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, req, ierr)
      call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    else
      call MPI_Reduce_scatter(dsend, drecv, counts, MPI_DOUBLE_PRECISION, MPI_SUM, MPI_COMM_WORLD, ierr)
    end if
    n = sum(counts(0:rank - 1))
    do i = 1, counts(rank)
      call expect(drecv(i) == dble(nprocs * (n + i) + nprocs * (nprocs - 1) / 2), 'reduce_scatter', variant)
    end do
    deallocate(dsend, drecv)
  end do

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(a)', 'test_fortran_vcoll: passed'
    else
      print '(a,i0,a)', 'test_fortran_vcoll: ', total, ' failures'
    end if
  end if
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1

contains

  integer function item_of(src, dst, i)
    integer, intent(in) :: src, dst, i
    item_of = 100000 * (src + 1) + 1000 * (dst + 2) + i
  end function

  ! Zero for some ranks, else about `scale` items.
  integer function block_count(p, variant, scale)
    integer, intent(in) :: p, variant, scale
    block_count = mod(p * 3 + variant, 4) * scale + mod(p, 2)
    if (mod(p + variant, 3) == 0) block_count = 0
  end function

  integer function pair_count(src, dst, symmetric)
    integer, intent(in) :: src, dst
    logical, intent(in) :: symmetric
    if (symmetric) then
      pair_count = mod(src + dst + src * dst, 3) * 400
    else
      pair_count = mod(src + 2 * dst, 3) * 400 + mod(src, 2)
    end if
  end function

  ! Displacements of blocks laid out last to first with gaps; the buffer
  ! length it needs.
  integer function backwards(cnt, dsp)
    integer, intent(in) :: cnt(0:)
    integer, intent(out) :: dsp(0:)
    integer :: q, at
    at = 1
    do q = size(cnt) - 1, 0, -1
      dsp(q) = at
      at = at + cnt(q) + mod(q, 2) + 1
    end do
    backwards = at + 1
  end function

  subroutine expected_blocks(w, cnt, dsp, dst)
    integer, intent(out) :: w(:)
    integer, intent(in) :: cnt(0:), dsp(0:), dst
    integer :: q, j
    w = -1
    do q = 0, size(cnt) - 1
      do j = 1, cnt(q)
        w(dsp(q) + j) = item_of(q, dst, j)
      end do
    end do
  end subroutine

  subroutine expect(ok, what, variant)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer, intent(in) :: variant
    if (.not. ok) then
      failures = failures + 1
      if (failures < 20) print '(a,i0,a,a,a,i0)', 'rank ', rank, ': ', what, ' wrong in variant ', variant
    end if
  end subroutine

  subroutine scans(variant, m)
    integer, intent(in) :: variant, m
    integer :: is(m), ir(m), iwant(m), j, q, rq
    double precision :: ds(m), dr(m), dwant(m)
    logical :: inplace, nb
    inplace = mod(variant, 2) == 1
    nb = variant >= 2
    ! integer SUM, inclusive
    do j = 1, m
      is(j) = rank * j - 7
      iwant(j) = 0
      do q = 0, rank
        iwant(j) = iwant(j) + q * j - 7
      end do
    end do
    call integer_scan(.false., MPI_SUM, inplace, nb, is, ir, m)
    call expect(all(ir == iwant), 'scan integer sum', variant)
    ! integer PROD, exclusive (rank 0's result is undefined)
    do j = 1, m
      is(j) = mod(rank + j, 3) + 1
      iwant(j) = 1
      do q = 0, rank - 1
        iwant(j) = iwant(j) * (mod(q + j, 3) + 1)
      end do
    end do
    call integer_scan(.true., MPI_PROD, inplace, nb, is, ir, m)
    if (rank > 0) call expect(all(ir == iwant), 'exscan integer prod', variant)
    ! double MAX, inclusive, and MIN, exclusive
    do j = 1, m
      ds(j) = dble(mod(rank * 7 + j * 3, 11) - 5)
      dwant(j) = ds(j)
      do q = 0, rank
        dwant(j) = max(dwant(j), dble(mod(q * 7 + j * 3, 11) - 5))
      end do
    end do
    if (nb) then
      call MPI_Iscan(ds, dr, m, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, rq, ierr)
      call MPI_Wait(rq, MPI_STATUS_IGNORE, ierr)
    else
      call MPI_Scan(ds, dr, m, MPI_DOUBLE_PRECISION, MPI_MAX, MPI_COMM_WORLD, ierr)
    end if
    call expect(all(dr == dwant), 'scan double max', variant)
    do j = 1, m
      dwant(j) = 1d9
      do q = 0, rank - 1
        dwant(j) = min(dwant(j), dble(mod(q * 7 + j * 3, 11) - 5))
      end do
    end do
    dr = ds
    if (inplace) then
      call MPI_Exscan(MPI_IN_PLACE, dr, m, MPI_DOUBLE_PRECISION, MPI_MIN, MPI_COMM_WORLD, ierr)
    else
      call MPI_Exscan(ds, dr, m, MPI_DOUBLE_PRECISION, MPI_MIN, MPI_COMM_WORLD, ierr)
    end if
    if (rank > 0) call expect(all(dr == dwant), 'exscan double min', variant)
  end subroutine

  ! The integer scans of `scans` (inclusive, or exclusive) of is into ir with op, in the variant's
  ! form: in place (ir holding is on entry), nonblocking, or blocking.
  subroutine integer_scan(exclusive, op, inplace, nb, is, ir, m)
    logical, intent(in) :: exclusive, inplace, nb
    integer, intent(in) :: op, m, is(m)
    integer, intent(out) :: ir(m)
    integer :: rq
    ir = is
    if (inplace) then
      if (exclusive) then
        call MPI_Exscan(MPI_IN_PLACE, ir, m, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
      else
        call MPI_Scan(MPI_IN_PLACE, ir, m, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
      end if
    else if (nb) then
      if (exclusive) then
        call MPI_Iexscan(is, ir, m, MPI_INTEGER, op, MPI_COMM_WORLD, rq, ierr)
      else
        call MPI_Iscan(is, ir, m, MPI_INTEGER, op, MPI_COMM_WORLD, rq, ierr)
      end if
      call MPI_Wait(rq, MPI_STATUS_IGNORE, ierr)
    else if (exclusive) then
      call MPI_Exscan(is, ir, m, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
    else
      call MPI_Scan(is, ir, m, MPI_INTEGER, op, MPI_COMM_WORLD, ierr)
    end if
  end subroutine

end program test_fortran_vcoll
