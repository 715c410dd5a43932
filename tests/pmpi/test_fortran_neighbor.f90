! SPDX-License-Identifier: Apache-2.0
!
! Neighbourhood collectives and MPI_Alltoallw from Fortran (`use mpi`),
! which reach the layer only through its own mpi_*_ entry points. The same
! coverage as tests/conformance/neighbor.c: 1-D and 2-D Cart topologies,
! periodic and not (MPI_PROC_NULL blocks stay untouched), a distributed
! graph with different numbers of sources and destinations per rank; on each
! MPI_Neighbor_allgather(v), _alltoall(v/w) blocking and all five
! MPI_Ineighbor_* outstanding at once; then MPI_(I)alltoallw on
! MPI_COMM_WORLD. v and w forms use non-zero displacements with gaps, the w
! forms receive into strided vector types; every element is checked.
! Where both Cart neighbours of a periodic dimension are one rank (size 1
! or 2) either block order is accepted (see neighbor.c).
module nbr_check
  use mpi
  implicit none
  integer, parameter :: maxn = 16, maxp = 64, blk = 4, guard = -7
  integer :: failures = 0
  integer :: nranks, nsrc(0:maxp - 1), ndst(0:maxp - 1)
  integer :: srcs(maxn, 0:maxp - 1), dsts(maxn, 0:maxp - 1)
  logical :: is_cart
contains
  integer function val(s, j, i)
    integer, intent(in) :: s, j, i
    val = s * 100000 + j * 1000 + i + 1
  end function

  ! Elements sender s sends to its destination j (0-based).
  integer function cnt(s, j)
    integer, intent(in) :: s, j
    if (is_cart) then
      cnt = 1 + mod(s + j / 2, 3)
    else
      cnt = 1 + mod(s + 2 * j, 4)
    end if
  end function

  ! The sender's 0-based block landing in block k (0-based) of rank r; alt
  ! the other acceptable one or -1.
  integer function sender_block(r, k, alt)
    integer, intent(in) :: r, k
    integer, intent(out) :: alt
    integer :: s, occ, q, j
    s = srcs(k + 1, r)
    alt = -1
    if (is_cart) then
      sender_block = ieor(k, 1)
      if (srcs(ieor(k, 1) + 1, r) == s) alt = k
      return
    end if
    occ = 0
    do q = 0, k - 1
      if (srcs(q + 1, r) == s) occ = occ + 1
    end do
    sender_block = -1
    do j = 0, ndst(s) - 1
      if (dsts(j + 1, s) == r) then
        if (occ == 0) then
          sender_block = j
          return
        end if
        occ = occ - 1
      end if
    end do
  end function

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (.not. ok) then
      failures = failures + 1
      if (failures < 20) print '(A)', 'FAIL: '//what
    end if
  end subroutine

  subroutine gather_lists(comm)
    integer, intent(in) :: comm
    integer :: kind, nd, d, ierr, mine(2 + 2 * maxn), r
    logical :: w
    integer :: s(maxn), t(maxn), wi(maxn), wo(maxn)
    integer, allocatable :: all(:, :)
    call MPI_Comm_size(comm, nranks, ierr)
    call MPI_Topo_test(comm, kind, ierr)
    mine = -99
    if (kind == MPI_CART) then
      call MPI_Cartdim_get(comm, nd, ierr)
      do d = 0, nd - 1
        call MPI_Cart_shift(comm, d, 1, s(2 * d + 1), s(2 * d + 2), ierr)
      end do
      t = s
      mine(1) = 2 * nd
      mine(2) = 2 * nd
    else
      call MPI_Dist_graph_neighbors_count(comm, mine(1), mine(2), w, ierr)
      call MPI_Dist_graph_neighbors(comm, mine(1), s, wi, mine(2), t, wo, ierr)
    end if
    mine(3:2 + mine(1)) = s(1:mine(1))
    mine(3 + maxn:2 + maxn + mine(2)) = t(1:mine(2))
    allocate(all(2 + 2 * maxn, 0:nranks - 1))
    call MPI_Allgather(mine, 2 + 2 * maxn, MPI_INTEGER, all, 2 + 2 * maxn, MPI_INTEGER, comm, ierr)
    do r = 0, nranks - 1
      nsrc(r) = all(1, r)
      ndst(r) = all(2, r)
      srcs(:, r) = all(3:2 + maxn, r)
      dsts(:, r) = all(3 + maxn:2 + 2 * maxn, r)
    end do
    deallocate(all)
  end subroutine

  ! One topology: every call blocking, then the five non-blocking ones at once.
  subroutine run_topology(comm, rank, name)
    integer, intent(in) :: comm, rank
    character(*), intent(in) :: name
    integer :: nin, nout, j, k, i, s, alt, sb, ierr, c, form, pos
    integer :: sag(blk), rag(blk * maxn), ragv(maxn * (blk + 2) + 3), a2as(blk * maxn), a2ar(blk * maxn)
    integer :: rc_agv(maxn), rd_agv(maxn)
    integer :: sv(maxn * 6), rv(maxn * 7), sc(maxn), sd(maxn), rc(maxn), rd(maxn)
    integer :: sw(maxn * 6), rw(maxn * 8), scw(maxn), rcw(maxn), stw(maxn), rtw(maxn)
    integer(kind=MPI_ADDRESS_KIND) :: sdw(maxn), rdw(maxn)
    logical :: written(maxn * 8), ok, ok_alt
    integer :: reqs(5)
    character(96) :: what

    call gather_lists(comm)
    nin = nsrc(rank)
    nout = ndst(rank)
    do i = 1, blk
      sag(i) = val(rank, 0, i - 1)
    end do
    do j = 0, nout - 1
      do i = 1, blk
        a2as(j * blk + i) = val(rank, j, i - 1)
      end do
    end do
    ! v and w layouts: displacements with gaps
    sv = guard
    sw = guard
    pos = 1
    do j = 0, nout - 1
      sc(j + 1) = cnt(rank, j)
      sd(j + 1) = pos
      scw(j + 1) = cnt(rank, j)
      sdw(j + 1) = int(pos, MPI_ADDRESS_KIND) * 4
      stw(j + 1) = MPI_INTEGER
      do i = 0, sc(j + 1) - 1
        sv(pos + i + 1) = val(rank, j, i)
        sw(pos + i + 1) = val(rank, j, i)
      end do
      pos = pos + sc(j + 1) + 1
    end do
    pos = 2
    do k = 0, nin - 1
      rc_agv(k + 1) = blk
      rd_agv(k + 1) = 3 + k * (blk + 2)
      s = srcs(k + 1, rank)
      c = 2
      if (s /= MPI_PROC_NULL) c = cnt(s, sender_block(rank, k, alt))
      rc(k + 1) = c
      rd(k + 1) = pos
      rcw(k + 1) = 1
      rdw(k + 1) = int(pos, MPI_ADDRESS_KIND) * 4
      call MPI_Type_vector(c, 1, 2, MPI_INTEGER, rtw(k + 1), ierr)
      call MPI_Type_commit(rtw(k + 1), ierr)
      pos = pos + 2 * c + 1
    end do

    do form = 0, 1
      rag = guard
      ragv = guard
      a2ar = guard
      rv = guard
      rw = guard
      if (form == 0) then
        call MPI_Neighbor_allgather(sag, blk, MPI_INTEGER, rag, blk, MPI_INTEGER, comm, ierr)
        call MPI_Neighbor_allgatherv(sag, blk, MPI_INTEGER, ragv, rc_agv, rd_agv, MPI_INTEGER, comm, ierr)
        call MPI_Neighbor_alltoall(a2as, blk, MPI_INTEGER, a2ar, blk, MPI_INTEGER, comm, ierr)
        call MPI_Neighbor_alltoallv(sv, sc, sd, MPI_INTEGER, rv, rc, rd, MPI_INTEGER, comm, ierr)
        call MPI_Neighbor_alltoallw(sw, scw, sdw, stw, rw, rcw, rdw, rtw, comm, ierr)
      else
        call MPI_Ineighbor_alltoallw(sw, scw, sdw, stw, rw, rcw, rdw, rtw, comm, reqs(1), ierr)
        call MPI_Ineighbor_allgather(sag, blk, MPI_INTEGER, rag, blk, MPI_INTEGER, comm, reqs(2), ierr)
        call MPI_Ineighbor_alltoallv(sv, sc, sd, MPI_INTEGER, rv, rc, rd, MPI_INTEGER, comm, reqs(3), ierr)
        call MPI_Ineighbor_allgatherv(sag, blk, MPI_INTEGER, ragv, rc_agv, rd_agv, MPI_INTEGER, comm, reqs(4), ierr)
        call MPI_Ineighbor_alltoall(a2as, blk, MPI_INTEGER, a2ar, blk, MPI_INTEGER, comm, reqs(5), ierr)
        call MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE, ierr)
      end if
      written = .false.
      do k = 0, nin - 1
        write (what, '(A,A,I0,A,I0)') name, ' form ', form, ' block ', k
        s = srcs(k + 1, rank)
        if (s == MPI_PROC_NULL) then
          call expect(all(rag(k * blk + 1:(k + 1) * blk) == guard), trim(what)//' allgather PROC_NULL')
          call expect(all(a2ar(k * blk + 1:(k + 1) * blk) == guard), trim(what)//' alltoall PROC_NULL')
          cycle
        end if
        sb = sender_block(rank, k, alt)
        do i = 0, blk - 1
          call expect(rag(k * blk + i + 1) == val(s, 0, i), trim(what)//' neighbor_allgather')
          call expect(ragv(rd_agv(k + 1) + i + 1) == val(s, 0, i), trim(what)//' neighbor_allgatherv')
        end do
        ok = .true.
        ok_alt = alt >= 0
        do i = 0, blk - 1
          if (a2ar(k * blk + i + 1) /= val(s, sb, i)) ok = .false.
          if (alt >= 0) then
            if (a2ar(k * blk + i + 1) /= val(s, alt, i)) ok_alt = .false.
          end if
        end do
        call expect(ok .or. ok_alt, trim(what)//' neighbor_alltoall')
        ok = .true.
        ok_alt = alt >= 0
        do i = 0, rc(k + 1) - 1
          if (rv(rd(k + 1) + i + 1) /= val(s, sb, i)) ok = .false.
          if (rw(rd(k + 1) + 2 * i + 1) /= val(s, sb, i)) ok = .false.
          if (alt >= 0) then
            if (rv(rd(k + 1) + i + 1) /= val(s, alt, i)) ok_alt = .false.
            if (rw(rd(k + 1) + 2 * i + 1) /= val(s, alt, i)) ok_alt = .false.
          end if
          written(rd(k + 1) + i + 1) = .true.
        end do
        call expect(ok .or. ok_alt, trim(what)//' neighbor_alltoallv/w')
      end do
      ! everything outside the received elements untouched
      do i = 1, size(rv)
        if (.not. written(i)) call expect(rv(i) == guard, name//' alltoallv gap written')
      end do
      written = .false.
      do k = 0, nin - 1
        if (srcs(k + 1, rank) == MPI_PROC_NULL) cycle
        do i = 0, rc(k + 1) - 1
          written(rd(k + 1) + 2 * i + 1) = .true.
        end do
      end do
      do i = 1, size(rw)
        if (.not. written(i)) call expect(rw(i) == guard, name//' alltoallw element outside the blocks written')
      end do
      do i = 1, size(ragv)
        ok = .false.
        do k = 0, nin - 1
          if (srcs(k + 1, rank) /= MPI_PROC_NULL .and. i > rd_agv(k + 1) .and. i <= rd_agv(k + 1) + blk) ok = .true.
        end do
        if (.not. ok) call expect(ragv(i) == guard, name//' allgatherv gap written')
      end do
    end do
    do k = 1, nin
      call MPI_Type_free(rtw(k), ierr)
    end do
  end subroutine

  ! MPI_(I)alltoallw on MPI_COMM_WORLD: (1 + mod(r + p, 3)) integers from r
  ! to p at byte displacements, received into stride-2 vectors.
  subroutine run_alltoallw(rank, n)
    integer, intent(in) :: rank, n
    integer :: sc(0:maxp - 1), sd(0:maxp - 1), st(0:maxp - 1), rc(0:maxp - 1), rd(0:maxp - 1), rt(0:maxp - 1)
    integer :: sbuf(4 * maxp), rbuf(7 * maxp), p, i, c, spos, rpos, ierr, req, form
    logical :: written(7 * maxp)
    ! Block 0 at displacement 0 (Open MPI 4.1's coll/self scales byte
    ! displacements by the extent), later ones with gaps.
    spos = 0
    rpos = 0
    sbuf = guard
    written = .false.
    do p = 0, n - 1
      c = 1 + mod(rank + p, 3)
      sc(p) = c
      sd(p) = spos * 4
      st(p) = MPI_INTEGER
      do i = 0, c - 1
        sbuf(spos + i + 1) = val(rank, p, i)
      end do
      spos = spos + c + 2
      call MPI_Type_vector(c, 1, 2, MPI_INTEGER, rt(p), ierr)
      call MPI_Type_commit(rt(p), ierr)
      rc(p) = 1
      rd(p) = rpos * 4
      do i = 0, c - 1
        written(rpos + 2 * i + 1) = .true.
      end do
      rpos = rpos + 2 * c + 1
    end do
    do form = 0, 1
      rbuf = guard
      if (form == 0) then
        call MPI_Alltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD, ierr)
      else
        call MPI_Ialltoallw(sbuf, sc, sd, st, rbuf, rc, rd, rt, MPI_COMM_WORLD, req, ierr)
        call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      end if
      do p = 0, n - 1
        do i = 0, 1 + mod(rank + p, 3) - 1
          call expect(rbuf(rd(p) / 4 + 2 * i + 1) == val(p, rank, i), 'alltoallw block element')
        end do
      end do
      do i = 1, size(rbuf)
        if (.not. written(i)) call expect(rbuf(i) == guard, 'alltoallw element outside the blocks written')
      end do
    end do
    do p = 0, n - 1
      call MPI_Type_free(rt(p), ierr)
    end do
  end subroutine
end module

program test_fortran_neighbor
  use mpi
  use nbr_check
  implicit none
  integer :: ierr, rank, nprocs, comm, total, periodic, step, r, to, nin, nout
  integer :: dims(2), periods(2), dsrc(maxn), ddst(maxn), wts(maxn)

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  if (nprocs > maxp) call MPI_Abort(MPI_COMM_WORLD, 2, ierr)

  is_cart = .true.
  do periodic = 1, 0, -1
    dims(1) = nprocs
    periods(1) = periodic
    call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods == 1, .false., comm, ierr)
    call run_topology(comm, rank, '1-D Cart')
    call MPI_Comm_free(comm, ierr)
    dims = 0
    periods = periodic
    call MPI_Dims_create(nprocs, 2, dims, ierr)
    call MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods == 1, .false., comm, ierr)
    call run_topology(comm, rank, '2-D Cart')
    call MPI_Comm_free(comm, ierr)
  end do

  ! distributed graph: r -> r+1 for all r, r -> r+2 for even r, r -> r+3
  ! for r divisible by 3, both ends listing edges in that global order
  is_cart = .false.
  nin = 0
  nout = 0
  wts = 1
  do step = 1, 3
    do r = 0, nprocs - 1
      if (step == 2 .and. mod(r, 2) /= 0) cycle
      if (step == 3 .and. mod(r, 3) /= 0) cycle
      to = mod(r + step, nprocs)
      if (r == rank) then
        nout = nout + 1
        ddst(nout) = to
      end if
      if (to == rank) then
        nin = nin + 1
        dsrc(nin) = r
      end if
    end do
  end do
  call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, nin, dsrc, wts, nout, ddst, wts, MPI_INFO_NULL, .false., &
                                      comm, ierr)
  call run_topology(comm, rank, 'dist-graph')
  call MPI_Comm_free(comm, ierr)

  call run_alltoallw(rank, nprocs)

  call MPI_Allreduce(failures, total, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (total == 0) then
      print '(A)', 'test_fortran_neighbor: passed'
    else
      print '(A,I0,A)', 'test_fortran_neighbor: ', total, ' failures'
    end if
  end if
  call MPI_Finalize(ierr)
  if (total /= 0) stop 1
end program
