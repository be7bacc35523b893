! SPDX-License-Identifier: BSD-2-Clause
! glue_fortran: a Fortran program (use mpi) through the MPI glue.  Open
! MPI's Fortran bindings call PMPI_* directly, so this checks the glue's
! own Fortran entry points: results exact, MPI_IN_PLACE, a split
! communicator, an idup's and a distributed graph (its neighbourhood
! alltoall and alltoallw), an alltoallw, a
! non-blocking allreduce; the runner checks the report.
program glue_fortran
  use mpi
  implicit none
  integer :: ierr, rank, nprocs, i, sub, srank, ssize, req
  integer :: a(7), b(7), want
  integer, allocatable :: s(:), r(:)
  double precision :: d(5), e(5)
  logical :: ok

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs, ierr)
  ok = .true.

  do i = 1, 7
    a(i) = rank + i
  end do
  call MPI_Allreduce(a, b, 7, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  do i = 1, 7
    want = nprocs * (nprocs - 1) / 2 + nprocs * i
    if (b(i) /= want) ok = .false.
  end do

  ! in place
  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b, 7, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  if (b(1) /= nprocs) ok = .false.

  ! doubles, bcast
  d = 0d0
  if (rank == 0) d = (/ 1.5d0, 2.5d0, 3.5d0, 4.5d0, 5.5d0 /)
  call MPI_Bcast(d, 5, MPI_DOUBLE_PRECISION, 0, MPI_COMM_WORLD, ierr)
  if (d(5) /= 5.5d0) ok = .false.

  ! alltoall
  allocate(s(nprocs), r(nprocs))
  do i = 1, nprocs
    s(i) = rank * 100 + i - 1
  end do
  call MPI_Alltoall(s, 1, MPI_INTEGER, r, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
  do i = 1, nprocs
    if (r(i) /= (i - 1) * 100 + rank) ok = .false.
  end do

  ! non-blocking reduce_scatter_block: block k of everyone's 2 * nprocs
  ! vector, its element j being rank * 10 + j, lands at rank k
  deallocate(s)
  allocate(s(2 * nprocs))
  do i = 1, 2 * nprocs
    s(i) = rank * 10 + i
  end do
  call MPI_Ireduce_scatter_block(s, a, 2, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  do i = 1, 2
    want = 10 * nprocs * (nprocs - 1) / 2 + nprocs * (2 * rank + i)
    if (a(i) /= want) ok = .false.
  end do

  ! reduce_scatter, rank k's block k + 1 long: element j of the vector
  ! is rank * 10 + j on each rank
  deallocate(s)
  allocate(s(nprocs * (nprocs + 1) / 2))
  do i = 1, nprocs * (nprocs + 1) / 2
    s(i) = rank * 10 + i
  end do
  block
    integer :: cnt(nprocs), at
    do i = 1, nprocs
      cnt(i) = i
    end do
    at = rank * (rank + 1) / 2
    b = -1
    call MPI_Reduce_scatter(s, b, cnt, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    do i = 1, rank + 1
      want = 10 * nprocs * (nprocs - 1) / 2 + nprocs * (at + i)
      if (b(i) /= want) ok = .false.
    end do
  end block

  ! neighbour alltoall on a line of the ranks: block 1 to the left, 2
  ! to the right; the ends' missing neighbours leave theirs alone
  block
    integer :: line, nbs(2), got(2), dims(1)
    logical :: per(1)
    dims(1) = nprocs
    per(1) = .false.
    call MPI_Cart_create(MPI_COMM_WORLD, 1, dims, per, .false., line, ierr)
    nbs = (/ rank * 10 + 1, rank * 10 + 2 /)
    got = -1
    call MPI_Neighbor_alltoall(nbs, 1, MPI_INTEGER, got, 1, MPI_INTEGER, line, ierr)
    if (rank > 0) then
      if (got(1) /= (rank - 1) * 10 + 2) ok = .false.
    else
      if (got(1) /= -1) ok = .false.
    end if
    if (rank < nprocs - 1) then
      if (got(2) /= (rank + 1) * 10 + 1) ok = .false.
    else
      if (got(2) /= -1) ok = .false.
    end if
    call MPI_Comm_free(line, ierr)
  end block

  ! non-blocking gather to the last rank, then scatter back from it
  b = -1
  a(1) = rank + 7
  call MPI_Igather(a, 1, MPI_INTEGER, r, 1, MPI_INTEGER, nprocs - 1, &
                   MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  if (rank == nprocs - 1) then
    do i = 1, nprocs
      if (r(i) /= i + 6) ok = .false.
      r(i) = r(i) * 2
    end do
  end if
  call MPI_Iscatter(r, 1, MPI_INTEGER, b, 1, MPI_INTEGER, nprocs - 1, &
                    MPI_COMM_WORLD, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  if (b(1) /= 2 * (rank + 7)) ok = .false.

  ! a split communicator, non-blocking
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, sub, ierr)
  call MPI_Comm_rank(sub, srank, ierr)
  call MPI_Comm_size(sub, ssize, ierr)
  d = dble(rank)
  call MPI_Iallreduce(d, e, 5, MPI_DOUBLE_PRECISION, MPI_SUM, sub, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  want = 0
  do i = mod(rank, 2), nprocs - 1, 2
    want = want + i
  end do
  if (e(3) /= dble(want)) ok = .false.
  call MPI_Comm_free(sub, ierr)

  ! a ring as a distributed graph, each member naming its own neighbours
  block
    integer :: ring, srcs(1), dsts(1), sv(1), rv(1)
    srcs(1) = mod(rank + nprocs - 1, nprocs)
    dsts(1) = mod(rank + 1, nprocs)
    call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, MPI_UNWEIGHTED, &
                                        1, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, &
                                        .false., ring, ierr)
    sv(1) = rank * 10 + 3
    rv(1) = -1
    call MPI_Ineighbor_alltoall(sv, 1, MPI_INTEGER, rv, 1, MPI_INTEGER, ring, req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    if (rv(1) /= srcs(1) * 10 + 3) ok = .false.
    ! its w form: the displacements are of MPI_ADDRESS_KIND, bytes
    block
      integer :: one(1), nt(1), nw(3)
      integer(kind=MPI_ADDRESS_KIND) :: sd0(1), rd4(1)
      one(1) = 1
      nt(1) = MPI_INTEGER
      sd0(1) = 0
      rd4(1) = 4
      nw = -1
      call MPI_Neighbor_alltoallw(sv, one, sd0, nt, nw, one, rd4, nt, ring, ierr)
      if (nw(1) /= -1 .or. nw(2) /= srcs(1) * 10 + 3 .or. nw(3) /= -1) ok = .false.
      nw = -1
      call MPI_Ineighbor_alltoallw(sv, one, sd0, nt, nw, one, rd4, nt, ring, req, ierr)
      call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
      if (nw(1) /= -1 .or. nw(2) /= srcs(1) * 10 + 3 .or. nw(3) /= -1) ok = .false.
    end block
    call MPI_Comm_free(ring, ierr)
  end block

  ! alltoallw: a type per block, byte displacements
  block
    integer :: wc(nprocs), wd(nprocs), wt(nprocs), ws(2 * nprocs), wr(2 * nprocs)
    do i = 1, nprocs
      wc(i) = 2
      wd(i) = 8 * (i - 1)
      wt(i) = MPI_INTEGER
      ws(2 * i - 1) = rank * 100 + i
      ws(2 * i) = -rank
    end do
    wr = 0
    call MPI_Alltoallw(ws, wc, wd, wt, wr, wc, wd, wt, MPI_COMM_WORLD, ierr)
    do i = 1, nprocs
      if (wr(2 * i - 1) /= (i - 1) * 100 + rank + 1) ok = .false.
      if (wr(2 * i) /= 1 - i) ok = .false.
    end do
    wr = 0
    call MPI_Ialltoallw(ws, wc, wd, wt, wr, wc, wd, wt, MPI_COMM_WORLD, req, ierr)
    call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
    do i = 1, nprocs
      if (wr(2 * i - 1) /= (i - 1) * 100 + rank + 1) ok = .false.
      if (wr(2 * i) /= 1 - i) ok = .false.
    end do
  end block

  ! a communicator of MPI_Comm_idup, named by the glue
  call MPI_Comm_idup(MPI_COMM_WORLD, sub, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  a(1) = rank + 1
  call MPI_Iscan(a, b, 1, MPI_INTEGER, MPI_SUM, sub, req, ierr)
  call MPI_Wait(req, MPI_STATUS_IGNORE, ierr)
  if (b(1) /= (rank + 1) * (rank + 2) / 2) ok = .false.
  call MPI_Comm_free(sub, ierr)

  call MPI_Allreduce(MPI_IN_PLACE, ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD, ierr)
  if (rank == 0) then
    if (ok) then
      print '(a,i0,a)', 'glue_fortran: PASS (np=', nprocs, ')'
    else
      print '(a)', 'glue_fortran: FAIL: a result was wrong'
    end if
  end if
  call MPI_Finalize(ierr)
  if (.not. ok) stop 1
end program glue_fortran
