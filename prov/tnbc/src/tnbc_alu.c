/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * The engine's ALU: every fi_op on every fi_datatype it makes sense for.
 *
 * Atomics (fi_atomic(3)) run here on the target, and the collective
 * offload reuses the same element loops for its reductions (seed 002:
 * one ALU serves both).  Operations work on plain buffers: the caller
 * gathers the target range and holds the domain's atomic lock, so no
 * hardware atomics are needed and every type, including 16-byte long
 * double and 128-bit integers, is handled the same way.
 */
#include <complex.h>
#include <stdlib.h>

#include "tnbc.h"
#include "tnbc_alu.h"

typedef long double complex tnbc_ldcomplex;
typedef __int128 tnbc_int128;
typedef unsigned __int128 tnbc_uint128;

enum tnbc_type_class {
	TNBC_TC_NONE,
	TNBC_TC_INT, /* every op */
	TNBC_TC_REAL, /* no bitwise, no MSWAP */
	TNBC_TC_COMPLEX, /* sums, products, equality */
};

static enum tnbc_type_class tnbc_alu_class(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
	case FI_INT16:
	case FI_UINT16:
	case FI_INT32:
	case FI_UINT32:
	case FI_INT64:
	case FI_UINT64:
	case FI_INT128:
	case FI_UINT128:
		return TNBC_TC_INT;
	case FI_FLOAT:
	case FI_DOUBLE:
	case FI_LONG_DOUBLE:
		return TNBC_TC_REAL;
	case FI_FLOAT_COMPLEX:
	case FI_DOUBLE_COMPLEX:
	case FI_LONG_DOUBLE_COMPLEX:
		return TNBC_TC_COMPLEX;
	default:
		return TNBC_TC_NONE;
	}
}

size_t tnbc_alu_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8:
	case FI_UINT8:
		return 1;
	case FI_INT16:
	case FI_UINT16:
		return 2;
	case FI_INT32:
	case FI_UINT32:
	case FI_FLOAT:
		return 4;
	case FI_INT64:
	case FI_UINT64:
	case FI_DOUBLE:
	case FI_FLOAT_COMPLEX:
		return 8;
	case FI_DOUBLE_COMPLEX:
	case FI_INT128:
	case FI_UINT128:
		return 16;
	case FI_LONG_DOUBLE:
		return sizeof(long double);
	case FI_LONG_DOUBLE_COMPLEX:
		return sizeof(tnbc_ldcomplex);
	default:
		return 0;
	}
}

bool tnbc_alu_valid(enum tnbc_atomic_kind kind, enum fi_op op,
		    enum fi_datatype dt)
{
	enum tnbc_type_class tc = tnbc_alu_class(dt);

	if (tc == TNBC_TC_NONE)
		return false;
	switch (kind) {
	case TNBC_ATOMIC_PLAIN:
		if (op == FI_ATOMIC_WRITE)
			return true;
		break;
	case TNBC_ATOMIC_FETCH:
		if (op == FI_ATOMIC_WRITE || op == FI_ATOMIC_READ)
			return true;
		break;
	case TNBC_ATOMIC_COMPARE:
		if (op == FI_CSWAP || op == FI_CSWAP_NE)
			return true;
		if (op >= FI_CSWAP_LE && op <= FI_CSWAP_GT)
			return tc != TNBC_TC_COMPLEX;
		return op == FI_MSWAP && tc == TNBC_TC_INT;
	}
	switch (op) {
	case FI_SUM:
	case FI_PROD:
		return true;
	case FI_MIN:
	case FI_MAX:
	case FI_LOR:
	case FI_LAND:
	case FI_LXOR:
		return tc != TNBC_TC_COMPLEX;
	case FI_BOR:
	case FI_BAND:
	case FI_BXOR:
		return tc == TNBC_TC_INT;
	default:
		return false;
	}
}

/*
 * One loop per (class, type): d is the target, s the operand, c the
 * compare operand.  Unaligned buffers are fine: elements are copied in
 * and out with memcpy.
 */
#define TNBC_LOAD(T, p, i)                                                     \
	({                                                                     \
		T v_;                                                          \
		memcpy(&v_, (const char *)(p) + (i) * sizeof(T), sizeof(T));   \
		v_;                                                            \
	})
#define TNBC_STORE(T, p, i, v)                                                 \
	do {                                                                   \
		T v_ = (v);                                                    \
		memcpy((char *)(p) + (i) * sizeof(T), &v_, sizeof(T));         \
	} while (0)

/* Operations common to every class. */
#define TNBC_ALU_COMMON(T)                                                     \
	case FI_SUM:                                                           \
		r = d + s;                                                     \
		break;                                                         \
	case FI_PROD:                                                          \
		r = d * s;                                                     \
		break;                                                         \
	case FI_ATOMIC_READ:                                                   \
		r = d;                                                         \
		break;                                                         \
	case FI_ATOMIC_WRITE:                                                  \
		r = s;                                                         \
		break;                                                         \
	case FI_CSWAP:                                                         \
		r = c == d ? s : d;                                            \
		break;                                                         \
	case FI_CSWAP_NE:                                                      \
		r = c != d ? s : d;                                            \
		break;

/* Operations of the ordered (real and integer) classes. */
#define TNBC_ALU_ORDERED(T)                                                    \
	case FI_MIN:                                                           \
		r = s < d ? s : d;                                             \
		break;                                                         \
	case FI_MAX:                                                           \
		r = s > d ? s : d;                                             \
		break;                                                         \
	case FI_LOR:                                                           \
		r = (d || s);                                                  \
		break;                                                         \
	case FI_LAND:                                                          \
		r = (d && s);                                                  \
		break;                                                         \
	case FI_LXOR:                                                          \
		r = (!d != !s);                                                \
		break;                                                         \
	case FI_CSWAP_LE:                                                      \
		r = c <= d ? s : d;                                            \
		break;                                                         \
	case FI_CSWAP_LT:                                                      \
		r = c < d ? s : d;                                             \
		break;                                                         \
	case FI_CSWAP_GE:                                                      \
		r = c >= d ? s : d;                                            \
		break;                                                         \
	case FI_CSWAP_GT:                                                      \
		r = c > d ? s : d;                                             \
		break;

#define TNBC_ALU_BITWISE(T)                                                    \
	case FI_BOR:                                                           \
		r = d | s;                                                     \
		break;                                                         \
	case FI_BAND:                                                          \
		r = d & s;                                                     \
		break;                                                         \
	case FI_BXOR:                                                          \
		r = d ^ s;                                                     \
		break;                                                         \
	case FI_MSWAP:                                                         \
		r = (s & c) | (d & ~c);                                        \
		break;

#define TNBC_ALU_LOOP(T, CASES)                                                \
	for (size_t i = 0; i < count; i++) {                                   \
		T d = TNBC_LOAD(T, dst, i);                                    \
		T s = src ? TNBC_LOAD(T, src, i) : (T)0;                       \
		T c = cmp ? TNBC_LOAD(T, cmp, i) : (T)0;                       \
		T r;                                                           \
                                                                               \
		(void)c;                                                       \
		switch (op) {                                                  \
			CASES                                                  \
		default:                                                       \
			return -FI_EOPNOTSUPP;                                 \
		}                                                              \
		if (old)                                                       \
			TNBC_STORE(T, old, i, d);                              \
		TNBC_STORE(T, dst, i, r);                                      \
	}                                                                      \
	return 0

#define TNBC_ALU_INT(T)                                                        \
	TNBC_ALU_LOOP(T, TNBC_ALU_COMMON(T) TNBC_ALU_ORDERED(T)                \
				 TNBC_ALU_BITWISE(T))
#define TNBC_ALU_REAL(T)                                                       \
	TNBC_ALU_LOOP(T, TNBC_ALU_COMMON(T) TNBC_ALU_ORDERED(T))
#define TNBC_ALU_CPLX(T) TNBC_ALU_LOOP(T, TNBC_ALU_COMMON(T))

/*
 * The reductions of whole vectors (a collective's fold, a reduce step,
 * an atomic with no fetch): the op chosen once, not per element, so that
 * the loop is plain loads, one operation and a store, which the compiler
 * vectorizes: this file is built with -ftree-vectorize (Makefile.am),
 * without which GCC's -O2 left it scalar, 3.5 times slower, for the
 * check it needs that dst and src do not overlap.  The expressions are
 * those of the loops above, applied element by element, so the two give
 * the same bits.  False: no such loop here.
 */
#define TNBC_RED_LOOP(T, EXPR)                                                 \
	for (size_t i = 0; i < count; i++) {                                   \
		T d, s;                                                        \
                                                                               \
		memcpy(&d, dp + i * sizeof(T), sizeof(T));                     \
		memcpy(&s, sp + i * sizeof(T), sizeof(T));                     \
		d = (T)(EXPR);                                                 \
		memcpy(dp + i * sizeof(T), &d, sizeof(T));                     \
	}                                                                      \
	return true

#define TNBC_RED_ORDERED(T)                                                    \
	case FI_SUM:                                                           \
		TNBC_RED_LOOP(T, d + s);                                       \
	case FI_PROD:                                                          \
		TNBC_RED_LOOP(T, d *s);                                        \
	case FI_MIN:                                                           \
		TNBC_RED_LOOP(T, s < d ? s : d);                               \
	case FI_MAX:                                                           \
		TNBC_RED_LOOP(T, s > d ? s : d);                               \
	case FI_LOR:                                                           \
		TNBC_RED_LOOP(T, d || s);                                      \
	case FI_LAND:                                                          \
		TNBC_RED_LOOP(T, d &&s);                                       \
	case FI_LXOR:                                                          \
		TNBC_RED_LOOP(T, !d != !s);

#define TNBC_RED_INT(T)                                                        \
	switch (op) {                                                          \
		TNBC_RED_ORDERED(T)                                            \
	case FI_BOR:                                                           \
		TNBC_RED_LOOP(T, d | s);                                       \
	case FI_BAND:                                                          \
		TNBC_RED_LOOP(T, d &s);                                        \
	case FI_BXOR:                                                          \
		TNBC_RED_LOOP(T, d ^ s);                                       \
	default:                                                               \
		return false;                                                  \
	}

#define TNBC_RED_REAL(T)                                                       \
	switch (op) {                                                          \
		TNBC_RED_ORDERED(T)                                            \
	default:                                                               \
		return false;                                                  \
	}

static bool tnbc_alu_reduce(enum fi_op op, enum fi_datatype dt, void *dst,
			    const void *src, size_t count)
{
	char *dp = dst;
	const char *sp = src;

	switch (dt) {
	case FI_INT8:
		TNBC_RED_INT(int8_t);
	case FI_UINT8:
		TNBC_RED_INT(uint8_t);
	case FI_INT16:
		TNBC_RED_INT(int16_t);
	case FI_UINT16:
		TNBC_RED_INT(uint16_t);
	case FI_INT32:
		TNBC_RED_INT(int32_t);
	case FI_UINT32:
		TNBC_RED_INT(uint32_t);
	case FI_INT64:
		TNBC_RED_INT(int64_t);
	case FI_UINT64:
		TNBC_RED_INT(uint64_t);
	case FI_FLOAT:
		TNBC_RED_REAL(float);
	case FI_DOUBLE:
		TNBC_RED_REAL(double);
	default:
		return false;
	}
}

int tnbc_alu_apply(enum fi_op op, enum fi_datatype dt, void *dst,
		   const void *src, const void *cmp, void *old, size_t count)
{
	if (src && !cmp && !old && tnbc_alu_reduce(op, dt, dst, src, count))
		return 0;
	switch (dt) {
	case FI_INT8:
		TNBC_ALU_INT(int8_t);
	case FI_UINT8:
		TNBC_ALU_INT(uint8_t);
	case FI_INT16:
		TNBC_ALU_INT(int16_t);
	case FI_UINT16:
		TNBC_ALU_INT(uint16_t);
	case FI_INT32:
		TNBC_ALU_INT(int32_t);
	case FI_UINT32:
		TNBC_ALU_INT(uint32_t);
	case FI_INT64:
		TNBC_ALU_INT(int64_t);
	case FI_UINT64:
		TNBC_ALU_INT(uint64_t);
	case FI_INT128:
		TNBC_ALU_INT(tnbc_int128);
	case FI_UINT128:
		TNBC_ALU_INT(tnbc_uint128);
	case FI_FLOAT:
		TNBC_ALU_REAL(float);
	case FI_DOUBLE:
		TNBC_ALU_REAL(double);
	case FI_LONG_DOUBLE:
		TNBC_ALU_REAL(long double);
	case FI_FLOAT_COMPLEX:
		TNBC_ALU_CPLX(float complex);
	case FI_DOUBLE_COMPLEX:
		TNBC_ALU_CPLX(double complex);
	case FI_LONG_DOUBLE_COMPLEX:
		TNBC_ALU_CPLX(tnbc_ldcomplex);
	default:
		return -FI_EOPNOTSUPP;
	}
}
