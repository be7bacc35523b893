/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * fi_getinfo: hints checked, fi_info built (tnbc_attr.c).
 */
#ifndef TNBC_ATTR_H
#define TNBC_ATTR_H

#include "tnbc.h"

int tnbc_check_hints(const struct fi_info *hints);
/* The payload every peer of the transport takes in one packet. */
size_t tnbc_slot_payload(void);
/* The capabilities an endpoint gets for the ones requested. */
uint64_t tnbc_caps_from(uint64_t req);
struct fi_info *tnbc_info_build(const struct fi_info *hints);

#define TNBC_EP_CAPS                                                           \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV |         \
	 FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE |               \
	 FI_DIRECTED_RECV | FI_SOURCE | FI_TRIGGER | FI_RMA_EVENT |            \
	 FI_COLLECTIVE)
#define TNBC_TX_CAPS                                                           \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ |         \
	 FI_WRITE | FI_TRIGGER | FI_COLLECTIVE)
#define TNBC_RX_CAPS                                                           \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ |  \
	 FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_TRIGGER |         \
	 FI_RMA_EVENT | FI_COLLECTIVE)
#define TNBC_DOM_CAPS (FI_LOCAL_COMM)
#define TNBC_CAPS     (TNBC_EP_CAPS | TNBC_DOM_CAPS)
/* Accepted in hints, returned only when asked for: multi-host MPI stacks
 * request it.  The shm transport reaches this host only; a peer elsewhere
 * fails with -FI_EHOSTUNREACH (fi_tnbc(7), LIMITATIONS). */
#define TNBC_HINT_CAPS (TNBC_CAPS | FI_REMOTE_COMM)
#define TNBC_TX_OP_FLAGS                                                       \
	(FI_INJECT | FI_COMPLETION | FI_INJECT_COMPLETE |                      \
	 FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE | FI_REMOTE_CQ_DATA)
#define TNBC_RX_OP_FLAGS (FI_COMPLETION)

/* The fi_info this provider starts from (tnbc_attr.c). */
int tnbc_getinfo(uint32_t version, const char *node, const char *service,
		 uint64_t flags, const struct fi_info *hints,
		 struct fi_info **info);

#endif /* TNBC_ATTR_H */
