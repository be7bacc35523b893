/* SPDX-License-Identifier: BSD-2-Clause */
/* The collective wrappers' shared helpers (tgf_coll.c, tgf_pmpi.c). */
#ifndef TGF_COLL_H
#define TGF_COLL_H

#include "tgf.h"

/* Whether non-blocking calls have a completion path in this MPI. */
bool tgf_nb_enabled(void);

/* MPI_Ialltoallw offloaded: true and *rc its result, or false (counted)
 * where the caller falls back to the MPI's own. */
bool tgf_ialltoallw_try(const void *sbuf, const int scounts[],
			const int sdispls[], const MPI_Datatype stypes[],
			void *rbuf, const int rcounts[], const int rdispls[],
			const MPI_Datatype rtypes[], MPI_Comm comm,
			MPI_Request *request, int *rc);

/* MPI_Ineighbor_alltoallw offloaded, as tgf_ialltoallw_try. */
bool tgf_ineighbor_alltoallw_try(const void *sbuf, const int scounts[],
				 const MPI_Aint sdispls[],
				 const MPI_Datatype stypes[], void *rbuf,
				 const int rcounts[], const MPI_Aint rdispls[],
				 const MPI_Datatype rtypes[], MPI_Comm comm,
				 MPI_Request *request, int *rc);

/* How many blocks each side of an alltoallw on comm has: one per member
 * of the remote group on an intercommunicator; 0 on a bad handle. */
int tgf_w_blocks(MPI_Comm comm);

/* How many blocks a neighbourhood call on comm receives and sends, on
 * every topology (0 and 0 on a communicator with none). */
void tgf_nbr_degree(MPI_Comm comm, int *in, int *out);

#endif /* TGF_COLL_H */
