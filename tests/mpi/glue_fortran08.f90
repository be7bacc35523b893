! SPDX-License-Identifier: BSD-2-Clause
! glue_fortran08: a Fortran 2008 program (use mpi_f08) through the MPI
! glue.  Open MPI's mpi_f08 bindings reach the MPI through bindings of
! their own, not the C calls: this checks that the glue sees them.
! Results exact, MPI_IN_PLACE, optional ierror left out, a split
! communicator, a distributed graph's and a merged one's, non-blocking
! calls completed by MPI_Waitall beside a point-to-point pair; under
! MPICH (TNBC_MPI4) MPI 4's idup with info and create from group; the
! runner checks the report.  Preprocessed (-cpp).
program glue_fortran08
  use mpi_f08
  implicit none
  type(MPI_Comm) :: sub
  type(MPI_Request) :: reqs(4)
  integer, parameter :: big = 262144
  integer :: rank, nprocs, i, srank, ssize, want, ierr, tok, got
  integer :: a(7), b(7), g(14)
  integer, allocatable :: s(:), r(:), sc(:), sd(:), rc(:), rd(:)
  double precision :: d(5), e(5), f(5)
  logical :: ok

  call MPI_Init()
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nprocs)
  ok = .true.

  do i = 1, 7
    a(i) = rank + i
  end do
  call MPI_Allreduce(a, b, 7, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
  if (ierr /= MPI_SUCCESS) ok = .false.
  do i = 1, 7
    want = nprocs * (nprocs - 1) / 2 + nprocs * i
    if (b(i) /= want) ok = .false.
  end do

  ! in place, no ierror
  b = a
  call MPI_Allreduce(MPI_IN_PLACE, b, 7, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD)
  if (b(1) /= nprocs) ok = .false.

  ! strided sections on even ranks, contiguous arrays on odd ones: MPICH's
  ! mpi_f08 passes a section as one element of a datatype of its own
  ! (which its reductions refuse, and its gathers misread as one slice),
  ! where Open MPI's compiler copies it in and out; the glue must decide
  ! alike on both
  g = -1
  if (rank == 0) then
    do i = 1, 14
      g(i) = 100 + i
    end do
  end if
  if (mod(rank, 2) == 0) then
    call MPI_Bcast(g(2:14:2), 7, MPI_INTEGER, 0, MPI_COMM_WORLD)
  else
    call MPI_Bcast(b, 7, MPI_INTEGER, 0, MPI_COMM_WORLD)
    g(2:14:2) = b
  end if
  do i = 1, 7
    if (g(2 * i) /= 100 + 2 * i) ok = .false.
    if (rank /= 0 .and. g(2 * i - 1) /= -1) ok = .false.
  end do

  ! a reduce to the last rank, a broadcast from it
  call MPI_Reduce(a, b, 7, MPI_INTEGER, MPI_MIN, nprocs - 1, MPI_COMM_WORLD)
  if (rank == nprocs - 1 .and. b(7) /= 7) ok = .false.
  d = 0d0
  if (rank == nprocs - 1) d = (/ 1.5d0, 2.5d0, 3.5d0, 4.5d0, 5.5d0 /)
  call MPI_Bcast(d, 5, MPI_DOUBLE_PRECISION, nprocs - 1, MPI_COMM_WORLD)
  if (d(5) /= 5.5d0) ok = .false.
  call MPI_Barrier(MPI_COMM_WORLD)

  ! alltoall, allgather, alltoallv (rank i sends i+1 integers to each)
  allocate(s(nprocs * nprocs + 2), r(nprocs * nprocs))
  allocate(sc(nprocs), sd(nprocs), rc(nprocs), rd(nprocs))
  do i = 1, nprocs
    s(i) = rank * 100 + i - 1
  end do
  call MPI_Alltoall(s, 1, MPI_INTEGER, r, 1, MPI_INTEGER, MPI_COMM_WORLD)
  do i = 1, nprocs
    if (r(i) /= (i - 1) * 100 + rank) ok = .false.
  end do
  call MPI_Allgather(rank * 3, 1, MPI_INTEGER, r, 1, MPI_INTEGER, &
                     MPI_COMM_WORLD)
  do i = 1, nprocs
    if (r(i) /= (i - 1) * 3) ok = .false.
  end do
  do i = 1, nprocs
    sc(i) = rank + 1
    sd(i) = (i - 1) * nprocs
    rc(i) = i
    rd(i) = (i - 1) * nprocs
  end do
  s = rank
  r = -1
  call MPI_Alltoallv(s, sc, sd, MPI_INTEGER, r, rc, rd, MPI_INTEGER, &
                     MPI_COMM_WORLD)
  do i = 1, nprocs
    if (any(r((i - 1) * nprocs + 1:(i - 1) * nprocs + i) /= i - 1)) ok = .false.
    if (i < nprocs) then
      if (r((i - 1) * nprocs + i + 1) /= -1) ok = .false.
    end if
  end do

  ! allgatherv and gatherv: member p gives p + 1 integers; scatterv back
  ! from the last rank, non-blocking
  do i = 1, nprocs
    rc(i) = i
    rd(i) = (i - 1) * (nprocs + 1)
  end do
  deallocate(r)
  allocate(r(nprocs * (nprocs + 1)))
  s(1:rank + 1) = rank + 500
  r = -1
  call MPI_Allgatherv(s, rank + 1, MPI_INTEGER, r, rc, rd, MPI_INTEGER, &
                      MPI_COMM_WORLD)
  do i = 1, nprocs
    if (any(r(rd(i) + 1:rd(i) + i) /= i + 499)) ok = .false.
    if (r(rd(i) + i + 1) /= -1) ok = .false.
  end do
  r = -1
  call MPI_Gatherv(s, rank + 1, MPI_INTEGER, r, rc, rd, MPI_INTEGER, 0, &
                   MPI_COMM_WORLD)
  if (rank == 0) then
    do i = 1, nprocs
      if (any(r(rd(i) + 1:rd(i) + i) /= i + 499)) ok = .false.
    end do
  end if
  if (rank == nprocs - 1) then
    do i = 1, nprocs
      r(rd(i) + 1:rd(i) + i) = i + 600
    end do
  end if
  s = -1
  call MPI_Iscatterv(r, rc, rd, MPI_INTEGER, s, rank + 1, MPI_INTEGER, &
                     nprocs - 1, MPI_COMM_WORLD, reqs(1))
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  if (any(s(1:rank + 1) /= rank + 601) .or. s(rank + 2) /= -1) ok = .false.

  ! a split communicator: two non-blocking calls and a ring exchange
  ! completed together
  call MPI_Comm_split(MPI_COMM_WORLD, mod(rank, 2), -rank, sub)
  call MPI_Comm_rank(sub, srank)
  call MPI_Comm_size(sub, ssize)
  d = dble(rank)
  f = 0d0
  if (srank == 0) f = 9d0
  tok = -1
  call MPI_Iallreduce(d, e, 5, MPI_DOUBLE_PRECISION, MPI_SUM, sub, reqs(1))
  call MPI_Ibcast(f, 5, MPI_DOUBLE_PRECISION, 0, sub, reqs(2))
  call MPI_Irecv(got, 1, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), 7, &
                 MPI_COMM_WORLD, reqs(3))
  tok = rank
  call MPI_Isend(tok, 1, MPI_INTEGER, mod(rank + 1, nprocs), 7, &
                 MPI_COMM_WORLD, reqs(4))
  call MPI_Waitall(4, reqs, MPI_STATUSES_IGNORE)
  want = 0
  do i = mod(rank, 2), nprocs - 1, 2
    want = want + i
  end do
  if (e(3) /= dble(want)) ok = .false.
  if (f(2) /= 9d0) ok = .false.
  if (got /= mod(rank + nprocs - 1, nprocs)) ok = .false.
  call MPI_Comm_free(sub)

  ! a ring as a distributed graph, each member naming its own neighbours
  block
    type(MPI_Comm) :: ring
    type(MPI_Request) :: rq
    integer :: srcs(1), dsts(1), sv(1), rv(1)
    srcs(1) = mod(rank + nprocs - 1, nprocs)
    dsts(1) = mod(rank + 1, nprocs)
    call MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, srcs, MPI_UNWEIGHTED, &
                                        1, dsts, MPI_UNWEIGHTED, MPI_INFO_NULL, &
                                        .false., ring)
    sv(1) = rank * 10 + 3
    rv(1) = -1
    call MPI_Ineighbor_alltoall(sv, 1, MPI_INTEGER, rv, 1, MPI_INTEGER, ring, rq)
    call MPI_Wait(rq, MPI_STATUS_IGNORE)
    if (rv(1) /= srcs(1) * 10 + 3) ok = .false.
    ! its w form (Open MPI's binding calls ompi_ineighbor_alltoallw_f)
    block
      integer :: one(1), nw(3)
      type(MPI_Datatype) :: nt(1)
      integer(kind=MPI_ADDRESS_KIND) :: sd0(1), rd4(1)
      one(1) = 1
      nt(1) = MPI_INTEGER
      sd0(1) = 0
      rd4(1) = 4
      nw = -1
      call MPI_Ineighbor_alltoallw(sv, one, sd0, nt, nw, one, rd4, nt, ring, rq)
      call MPI_Wait(rq, MPI_STATUS_IGNORE)
      if (nw(1) /= -1 .or. nw(2) /= srcs(1) * 10 + 3 .or. nw(3) /= -1) ok = .false.
    end block
    call MPI_Comm_free(ring)
  end block

  ! an intercommunicator's halves merged, lower half first
  if (nprocs > 1) then
    block
      type(MPI_Comm) :: half, inter, merged
      type(MPI_Request) :: rq
      integer :: up, gv(nprocs)
      up = 0
      if (rank >= nprocs / 2) up = 1
      call MPI_Comm_split(MPI_COMM_WORLD, up, rank, half)
      call MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, (1 - up) * (nprocs / 2), &
                                12, inter)
      call MPI_Intercomm_merge(inter, up == 1, merged)
      gv = -1
      call MPI_Iallgather(rank, 1, MPI_INTEGER, gv, 1, MPI_INTEGER, merged, rq)
      call MPI_Wait(rq, MPI_STATUS_IGNORE)
      do i = 1, nprocs
        if (gv(i) /= i - 1) ok = .false.
      end do
      call MPI_Comm_free(merged)
      call MPI_Comm_free(inter)
      call MPI_Comm_free(half)
    end block
  end if

  ! a large alltoall (which T-NBC, when on, returns early), its result
  ! sent on around the ring before anything touched it
  deallocate(s, r, sc)
  allocate(s(nprocs * big), r(nprocs * big), sc(nprocs * big))
  do i = 1, nprocs * big
    s(i) = rank * 1000000 + i
  end do
  call MPI_Alltoall(s, big, MPI_INTEGER, r, big, MPI_INTEGER, MPI_COMM_WORLD)
  call MPI_Isend(r, nprocs * big, MPI_INTEGER, mod(rank + 1, nprocs), 8, &
                 MPI_COMM_WORLD, reqs(1))
  call MPI_Recv(sc, nprocs * big, MPI_INTEGER, mod(rank + nprocs - 1, nprocs), &
                8, MPI_COMM_WORLD, MPI_STATUS_IGNORE)
  call MPI_Wait(reqs(1), MPI_STATUS_IGNORE)
  srank = mod(rank + nprocs - 1, nprocs)
  do i = 1, nprocs
    if (r((i - 1) * big + 1) /= (i - 1) * 1000000 + rank * big + 1) ok = .false.
    if (sc(i * big) /= (i - 1) * 1000000 + (srank + 1) * big) ok = .false.
  end do

#ifdef TNBC_MPI4
  ! MPI 4's constructors, which MPICH's mpi_f08 binds to PMPI_ directly:
  ! an idup with info and a communicator of a group and a string tag
  ! (trailing blanks are not part of it)
  block
    type(MPI_Comm) :: dc, fc
    type(MPI_Group) :: wg
    type(MPI_Request) :: rq
    integer :: one(1), pre(1)
    call MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, dc, rq)
    call MPI_Wait(rq, MPI_STATUS_IGNORE)
    call MPI_Comm_group(MPI_COMM_WORLD, wg)
    call MPI_Comm_create_from_group(wg, 'tnbc.f08  ', MPI_INFO_NULL, &
                                    MPI_ERRORS_RETURN, fc)
    one(1) = rank + 1
    pre(1) = -1
    call MPI_Iexscan(one, pre, 1, MPI_INTEGER, MPI_SUM, dc, rq)
    call MPI_Wait(rq, MPI_STATUS_IGNORE)
    if (rank > 0 .and. pre(1) /= rank * (rank + 1) / 2) ok = .false.
    pre(1) = -1
    call MPI_Exscan(one, pre, 1, MPI_INTEGER, MPI_SUM, fc)
    if (rank > 0 .and. pre(1) /= rank * (rank + 1) / 2) ok = .false.
    call MPI_Comm_free(dc)
    call MPI_Comm_free(fc)
    call MPI_Group_free(wg)
  end block
#endif

  call MPI_Allreduce(MPI_IN_PLACE, ok, 1, MPI_LOGICAL, MPI_LAND, MPI_COMM_WORLD)
  if (rank == 0) then
    if (ok) then
      print '(a,i0,a)', 'glue_fortran08: PASS (np=', nprocs, ')'
    else
      print '(a)', 'glue_fortran08: FAIL: a result was wrong'
    end if
  end if
  call MPI_Finalize()
  if (.not. ok) stop 1
end program glue_fortran08
