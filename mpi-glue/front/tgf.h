/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * The PMPI front-end's own declarations.  The front-end is one source,
 * compiled once per MPI's <mpi.h>; what differs between MPIs (how a
 * generalized request is completed from outside) is behind TGF_MPICH,
 * set from MPICH's own macro.
 */
#ifndef TGF_H
#define TGF_H

#include <mpi.h>
#include <stddef.h>

#include "../core/tg.h"

#if defined(MPICH_VERSION)
#define TGF_MPICH 1
#else
#define TGF_MPICH 0
#endif

/* A communicator as the glue knows it: an attribute on it. */
struct tgf_comm {
	uint32_t id; /* 0: the glue did not see it made */
	uint32_t children; /* communicators made from it so far */
	struct tg_comm *tc; /* NULL: every call falls back */
	/* a graph topology whose every member lists each neighbour at most
	 * once each way, agreed when it was made (tgf_graph_made) */
	bool graph_ok;
};

/* tgf_pmpi.c */
struct tgf_comm *tgf_comm(MPI_Comm comm);
/* After a constructor returned newcomm (MPI_COMM_NULL on members left
 * out), on every member of parent: names the child. */
void tgf_comm_made(MPI_Comm parent, MPI_Comm newcomm);
/* As tgf_comm_made after a graph constructor, which also agrees, over
 * newcomm, whether the child's neighbourhood calls can be offloaded. */
void tgf_comm_made_graph(MPI_Comm parent, MPI_Comm newcomm);
/* As above for MPI_Comm_create_group, collective over group only. */
void tgf_comm_made_group(MPI_Comm parent, MPI_Group group, int tag,
			 MPI_Comm newcomm);
/* After MPI_Intercomm_merge, on every member of the new communicator. */
void tgf_comm_made_merge(MPI_Comm newcomm);
/* After MPI 4's MPI_Comm_create_from_group (MPICH): its string tag, len
 * bytes (a Fortran one trimmed of its trailing blanks). */
void tgf_comm_made_from_group(const char *tag, size_t len, MPI_Comm newcomm);

/* tgf_persist.c: frees what persistent requests the program left. */
void tgf_persist_fini(void);

#endif /* TGF_H */
