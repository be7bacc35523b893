/* SPDX-License-Identifier: BSD-2-Clause */
/* Core requests as MPI requests (tgf_req.c). */
#ifndef TGF_REQ_H
#define TGF_REQ_H

#include "tgf.h"

/* Installs the completion path; -1 when this MPI offers none (then
 * non-blocking calls fall back). */
int tgf_req_init(void);
void tgf_req_fini(void);
struct tgf_stage;
/* Starts an MPI request for a core request about to be posted; st (may
 * be NULL) is unpacked and freed when it completes. */
struct tg_req *tgf_nb_begin(MPI_Request *request, struct tgf_stage *st);
/* A call that posted all the same, as the others wait for it, but will
 * complete with the MPI error class err (a root's own slice truncated). */
void tgf_nb_error(struct tg_req *r, int err);
/* The post was refused: the MPI request goes, *request is reset; the
 * stage given to tgf_nb_begin is the caller's again. */
void tgf_nb_abort(MPI_Request *request, struct tg_req *r);

#endif /* TGF_REQ_H */
