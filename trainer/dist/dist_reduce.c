/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_reduce.c - the element-wise reduction kernels of the TCP backend.
 *
 * Plain loops over restrict-qualified arrays, one per type and operation,
 * so the compiler vectorises them (dist.mk builds this file with -O3).
 * MAX and MIN keep the accumulator on ties and NaN comparisons, which
 * makes the result depend only on the order of the operands; every
 * algorithm fixes that order, so all ranks compute the same bits.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dist_priv.h"

#define DIST_CMP_KERNELS(T, NAME)                                              \
	static void into_max_##NAME(T *restrict acc, const T *restrict in,     \
				    size_t n)                                  \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			acc[i] = in[i] > acc[i] ? in[i] : acc[i];              \
	}                                                                      \
	static void into_min_##NAME(T *restrict acc, const T *restrict in,     \
				    size_t n)                                  \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			acc[i] = in[i] < acc[i] ? in[i] : acc[i];              \
	}                                                                      \
	static void to_max_##NAME(T *restrict out, const T *restrict a,        \
				  const T *restrict b, size_t n)               \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			out[i] = b[i] > a[i] ? b[i] : a[i];                    \
	}                                                                      \
	static void to_min_##NAME(T *restrict out, const T *restrict a,        \
				  const T *restrict b, size_t n)               \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			out[i] = b[i] < a[i] ? b[i] : a[i];                    \
	}                                                                      \
	static void scale_##NAME(T *restrict x, size_t n, T divisor)           \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			x[i] = (T)(x[i] / divisor);                            \
	}

/* Sums: floats keep the operand order (into_sum_rev adds the incoming
 * value first); integers go through the unsigned type so that overflow
 * wraps, defined, instead of being undefined behaviour. */
#define DIST_SUM_KERNELS(T, U, NAME)                                           \
	static void into_sum_##NAME(T *restrict acc, const T *restrict in,     \
				    size_t n)                                  \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			acc[i] = (T)((U)acc[i] + (U)in[i]);                    \
	}                                                                      \
	static void into_sum_rev_##NAME(T *restrict acc, const T *restrict in, \
					size_t n)                              \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			acc[i] = (T)((U)in[i] + (U)acc[i]);                    \
	}                                                                      \
	static void to_sum_##NAME(T *restrict out, const T *restrict a,        \
				  const T *restrict b, size_t n)               \
	{                                                                      \
		for (size_t i = 0; i < n; i++)                                 \
			out[i] = (T)((U)a[i] + (U)b[i]);                       \
	}

DIST_CMP_KERNELS(float, f32)
DIST_CMP_KERNELS(double, f64)
DIST_CMP_KERNELS(int32_t, i32)
DIST_CMP_KERNELS(int64_t, i64)
DIST_CMP_KERNELS(uint8_t, u8)
DIST_SUM_KERNELS(float, float, f32)
DIST_SUM_KERNELS(double, double, f64)
DIST_SUM_KERNELS(int32_t, uint32_t, i32)
DIST_SUM_KERNELS(int64_t, uint64_t, i64)
DIST_SUM_KERNELS(uint8_t, unsigned, u8)

#define DIST_DISPATCH_INTO(NAME)                                               \
	do {                                                                   \
		if (op == DIST_MAX)                                            \
			into_max_##NAME(acc, in, n);                           \
		else if (op == DIST_MIN)                                       \
			into_min_##NAME(acc, in, n);                           \
		else if (in_first)                                             \
			into_sum_rev_##NAME(acc, in, n);                       \
		else                                                           \
			into_sum_##NAME(acc, in, n);                           \
	} while (0)

void dist_reduce_into(enum dist_dtype dtype, enum dist_op op, void *acc,
		      const void *in, size_t n, int in_first)
{
	switch (dtype) {
	case DIST_FLOAT32: DIST_DISPATCH_INTO(f32); break;
	case DIST_FLOAT64: DIST_DISPATCH_INTO(f64); break;
	case DIST_INT32: DIST_DISPATCH_INTO(i32); break;
	case DIST_INT64: DIST_DISPATCH_INTO(i64); break;
	case DIST_UINT8: DIST_DISPATCH_INTO(u8); break;
	}
}

#define DIST_DISPATCH_TO(NAME)                                                 \
	do {                                                                   \
		if (op == DIST_MAX)                                            \
			to_max_##NAME(out, a, b, n);                           \
		else if (op == DIST_MIN)                                       \
			to_min_##NAME(out, a, b, n);                           \
		else                                                           \
			to_sum_##NAME(out, a, b, n);                           \
	} while (0)

void dist_reduce_to(enum dist_dtype dtype, enum dist_op op, void *out,
		    const void *a, const void *b, size_t n)
{
	switch (dtype) {
	case DIST_FLOAT32: DIST_DISPATCH_TO(f32); break;
	case DIST_FLOAT64: DIST_DISPATCH_TO(f64); break;
	case DIST_INT32: DIST_DISPATCH_TO(i32); break;
	case DIST_INT64: DIST_DISPATCH_TO(i64); break;
	case DIST_UINT8: DIST_DISPATCH_TO(u8); break;
	}
}

void dist_reduce_scale(enum dist_dtype dtype, void *x, size_t n, int divisor)
{
	if (divisor <= 1)
		return;
	switch (dtype) {
	case DIST_FLOAT32: scale_f32(x, n, (float)divisor); break;
	case DIST_FLOAT64: scale_f64(x, n, (double)divisor); break;
	case DIST_INT32: scale_i32(x, n, (int32_t)divisor); break;
	case DIST_INT64: scale_i64(x, n, (int64_t)divisor); break;
	case DIST_UINT8:
		if (divisor > 255)
			memset(x, 0, n); /* every uint8 sum is below it */
		else
			scale_u8(x, n, (uint8_t)divisor);
		break;
	}
}
