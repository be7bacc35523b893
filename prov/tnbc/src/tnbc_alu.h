/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The ALU (tnbc_alu.c): the arithmetic of atomics and reductions.
 */
#ifndef TNBC_ALU_H
#define TNBC_ALU_H

#include "tnbc.h"

/* alu (tnbc_alu.c) */
size_t tnbc_alu_size(enum fi_datatype dt);
bool tnbc_alu_valid(enum tnbc_atomic_kind kind, enum fi_op op,
		    enum fi_datatype dt);
/* dst = dst op src (compare ops: with cmp); the previous values go to
 * old when it is not NULL. */
int tnbc_alu_apply(enum fi_op op, enum fi_datatype dt, void *dst,
		   const void *src, const void *cmp, void *old, size_t count);

#endif /* TNBC_ALU_H */
