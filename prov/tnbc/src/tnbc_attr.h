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

#endif /* TNBC_ATTR_H */
