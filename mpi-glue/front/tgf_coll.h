/* SPDX-License-Identifier: BSD-2-Clause */
/* The collective wrappers' shared helpers (tgf_coll.c, tgf_pmpi.c). */
#ifndef TGF_COLL_H
#define TGF_COLL_H

#include "tgf.h"

/* Whether non-blocking calls have a completion path in this MPI. */
bool tgf_nb_enabled(void);

#endif /* TGF_COLL_H */
