/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The progress engine (tnbc_progress.c): the passes over a domain's
 * endpoints that the engine thread and polling application threads
 * make, and the engine thread's life.
 */
#ifndef TNBC_PROGRESS_H
#define TNBC_PROGRESS_H

#include "tnbc.h"

/* One pass over an endpoint (engine: the engine thread's). */
int tnbc_ep_progress(struct tnbc_ep *ep, bool engine);
/* A pass over every endpoint of the domain. */
void tnbc_domain_progress(struct tnbc_domain *domain, bool engine);
int tnbc_engine_start(struct tnbc_domain *domain);
void tnbc_engine_stop(struct tnbc_domain *domain);
/* Around a blocking wait of an application thread. */
void tnbc_app_wait(struct tnbc_domain *domain, bool begin);
bool tnbc_engine_handoff(struct tnbc_domain *domain);
/* Domains the engine thread of dom serves (0: it has none). */
int tnbc_engine_domains(struct tnbc_domain *dom);

#endif /* TNBC_PROGRESS_H */
