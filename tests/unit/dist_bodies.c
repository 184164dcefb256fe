/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_bodies.c - the collective bodies of the test_dist_* programs: what
 * each rank runs to check one operation (all-reduce, broadcast, reduce,
 * all-gather, send/recv, isend/irecv, barrier) against the serial
 * reference, on host memory (TCP) or device memory (NCCL) alike.
 * test_dist_ops runs them on the TCP backend, test_dist_nccl on NCCL.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist_fix.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"

/* ---- bodies ---- */

/* all_reduce_case: one all-reduce of n elements of every rank's input
 * (seed), in place or out of place, against the serial reference. */
static int all_reduce_case(struct dist *d, size_t n, enum dist_dtype dt,
			   enum dist_op op, unsigned seed, int in_place)
{
	int w = dist_world_size(d), r = dist_rank(d);
	size_t es = dist_dtype_size(dt);
	struct tbuf in, out;
	CHECK(tbuf_new(&in, n * es) == 0);
	CHECK(tbuf_new(&out, in_place ? 0 : n * es) == 0);
	struct tbuf *res = in_place ? &in : &out;
	fill_input(dt, in.host, n, r, seed);
	CHECK(tbuf_put(&in) == 0);
	CHECK_RC(dist_all_reduce(d, in.op, res->op, n, dt, op));
	CHECK(tbuf_get(res) == 0);
	CHECK(check_reduced("all_reduce", dt, op, w, res->host, n, seed) == 0);
	tbuf_free(&in);
	tbuf_free(&out);
	return 0;
}

/* Every dtype and op, sizes from 0 to past the ring threshold, in place
 * and out of place, against the serial reference. */
int body_all_reduce_matrix(struct dist *d, void *arg)
{
	int w = dist_world_size(d);
	size_t counts[] = {0, 1, (size_t)w - 1, 7, 1000, 16411, 70001};
	unsigned seed = 0;
	(void)arg;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		for (size_t t = 0; t < 5; t++) {
			for (size_t o = 0; o < 4; o++) {
				seed++;
				CHECK(all_reduce_case(d, counts[c],
						      all_dtypes[t], all_ops[o],
						      seed, seed & 1) == 0);
			}
		}
	}
	return 0;
}

/* Random (non-integer) floats: every rank must hold the same bits, and
 * they must be close to the exact sum. */
int body_all_reduce_bits(struct dist *d, void *arg)
{
	int w = dist_world_size(d), r = dist_rank(d);
	size_t counts[] = {3, 1000, 300001};
	(void)arg;
	for (size_t c = 0; c < 3; c++) {
		size_t n = counts[c];
		float *x = malloc(n * sizeof(float));
		uint32_t crcs[MAX_WORLD], mine;
		CHECK(x != NULL);
		for (int avg = 0; avg < 2; avg++) {
			for (size_t i = 0; i < n; i++)
				x[i] = (float)sin((double)(i * 7 + 1) *
						  (r + 1.37));
			CHECK_RC(dist_all_reduce(d, x, x, n, DIST_FLOAT32,
						 avg ? DIST_AVG : DIST_SUM));
			for (size_t i = 0; i < n; i += 97) {
				double want = 0;
				for (int k = 0; k < w; k++)
					want += sin((double)(i * 7 + 1) *
						    (k + 1.37));
				if (avg)
					want /= w;
				CHECK(fabs(x[i] - want) < 1e-4);
			}
			mine = crc32c(0, x, n * sizeof(float));
			CHECK_RC(
			    dist_all_gather(d, &mine, crcs, 1, DIST_INT32));
			for (int k = 0; k < w; k++)
				CHECK(crcs[k] == mine);
		}
		free(x);
	}
	return 0;
}

/* One large all-reduce per op (each op with its own dtype), of more than
 * 10 MiB that divides by no world size or chunk: the pipelined ring at
 * full size, many rounds, an uneven last one. */
int body_all_reduce_large(struct dist *d, void *arg)
{
	(void)arg;
	for (unsigned o = 0; o < 4; o++) {
		enum dist_dtype dt = large_dtypes[o];
		CHECK(all_reduce_case(d, large_count(dist_dtype_size(dt)), dt,
				      all_ops[o], 50 + o, o & 1) == 0);
	}
	return 0;
}

int body_all_reduce_one(struct dist *d, void *arg)
{
	const struct large_case *lc = arg;
	return all_reduce_case(d, lc->count, DIST_FLOAT32, lc->op, 5, 1);
}

/* broadcast_case: root's input reaches every rank (whose own input was
 * in the buffer before). */
static int broadcast_case(struct dist *d, size_t n, enum dist_dtype dt,
			  int root, unsigned seed)
{
	size_t es = dist_dtype_size(dt);
	struct tbuf b;
	CHECK(tbuf_new(&b, n * es) == 0);
	fill_input(dt, b.host, n, dist_rank(d), seed);
	CHECK(tbuf_put(&b) == 0);
	CHECK_RC(dist_broadcast(d, b.op, n, dt, root));
	CHECK(tbuf_get(&b) == 0);
	CHECK(check_input("broadcast", dt, b.host, n, root, seed) == 0);
	tbuf_free(&b);
	return 0;
}

int body_broadcast(struct dist *d, void *arg)
{
	int w = dist_world_size(d);
	size_t counts[] = {0, 1, 7, 1000, 300007};
	(void)arg;
	for (int root = 0; root < w; root++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]);
		     c++) {
			CHECK(broadcast_case(d, counts[c], DIST_UINT8, root,
					     11) == 0);
			CHECK(broadcast_case(d, counts[c], DIST_FLOAT64, root,
					     12) == 0);
		}
	}
	/* one large case, from the last rank (the far end of the chain) */
	CHECK(broadcast_case(d, large_count(4), DIST_INT32, w - 1, 13) == 0);
	return 0;
}

/* reduce_case: one reduce to root; ranks other than root pass no
 * receive buffer unless with_out (then it is scratch to them). */
static int reduce_case(struct dist *d, size_t n, enum dist_dtype dt,
		       enum dist_op op, int root, int with_out, unsigned seed)
{
	int w = dist_world_size(d), r = dist_rank(d);
	size_t es = dist_dtype_size(dt);
	struct tbuf in, out;
	CHECK(tbuf_new(&in, n * es) == 0);
	CHECK(tbuf_new(&out, n * es) == 0);
	fill_input(dt, in.host, n, r, seed);
	CHECK(tbuf_put(&in) == 0);
	CHECK_RC(dist_reduce(d, in.op, (r == root || with_out) ? out.op : NULL,
			     n, dt, op, root));
	if (r == root) {
		CHECK(tbuf_get(&out) == 0);
		CHECK(check_reduced("reduce", dt, op, w, out.host, n, seed) ==
		      0);
	}
	tbuf_free(&in);
	tbuf_free(&out);
	return 0;
}

int body_reduce(struct dist *d, void *arg)
{
	int w = dist_world_size(d);
	size_t counts[] = {0, 1, 2, 7, 5000, 100003, 300001};
	(void)arg;
	for (int root = 0; root < w; root++) {
		for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]);
		     c++) {
			size_t n = counts[c];
			enum dist_dtype dt = c & 1 ? DIST_INT64 : DIST_FLOAT32;
			int with_out = (c + (size_t)root) % 2 != 0;
			/* every op on the small sizes, one on the others */
			for (size_t o = 0; o < 4; o++) {
				if (n > 7 && o != (c + (size_t)root) % 4)
					continue;
				CHECK(reduce_case(d, n, dt, all_ops[o], root,
						  with_out,
						  3 + (unsigned)o) == 0);
			}
		}
	}
	/* one large case per op, each to another root */
	for (unsigned o = 0; o < 4; o++) {
		enum dist_dtype dt = large_dtypes[o];
		CHECK(reduce_case(d, large_count(dist_dtype_size(dt)), dt,
				  all_ops[o], (int)o % w, o & 1, 60 + o) == 0);
	}
	return 0;
}

/* all_gather_case: out of place, then in place (this rank's slot of the
 * receive buffer is the send buffer). */
static int all_gather_case(struct dist *d, size_t n, enum dist_dtype dt,
			   unsigned seed)
{
	int w = dist_world_size(d), r = dist_rank(d);
	size_t es = dist_dtype_size(dt), slot = n * es;
	struct tbuf in, out;
	CHECK(tbuf_new(&in, slot) == 0);
	CHECK(tbuf_new(&out, (size_t)w * slot) == 0);
	fill_input(dt, in.host, n, r, seed);
	CHECK(tbuf_put(&in) == 0);
	CHECK_RC(dist_all_gather(d, in.op, out.op, n, dt));
	CHECK(tbuf_get(&out) == 0);
	for (int k = 0; k < w; k++)
		CHECK(check_input("all_gather", dt, out.host + (size_t)k * slot,
				  n, k, seed) == 0);
	fill_input(dt, out.host + (size_t)r * slot, n, r, seed + 1);
	CHECK(tbuf_put(&out) == 0);
	CHECK_RC(dist_all_gather(d, out.op + (size_t)r * slot, out.op, n, dt));
	CHECK(tbuf_get(&out) == 0);
	for (int k = 0; k < w; k++)
		CHECK(check_input("all_gather in place", dt,
				  out.host + (size_t)k * slot, n, k,
				  seed + 1) == 0);
	tbuf_free(&in);
	tbuf_free(&out);
	return 0;
}

int body_all_gather(struct dist *d, void *arg)
{
	size_t counts[] = {0, 1, 5, 7, 100000};
	(void)arg;
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++)
		CHECK(all_gather_case(d, counts[c], DIST_INT32, 9) == 0);
	/* one large case: each rank's part alone is over 10 MiB */
	CHECK(all_gather_case(d, large_count(8), DIST_FLOAT64, 70) == 0);
	return 0;
}

/* The message sizes of the point-to-point bodies: one element, a few, a
 * round 1 MiB, and a large count (SIZE_MAX here: large_count). */
static const struct {
	size_t count;
	enum dist_dtype dtype;
} p2p_sizes[] = {
    {1, DIST_FLOAT64},
    {7, DIST_INT32},
    {1u << 20, DIST_UINT8},
    {SIZE_MAX, DIST_FLOAT32},
};
#define P2P_SIZES (sizeof(p2p_sizes) / sizeof(p2p_sizes[0]))

static size_t p2p_count(size_t s)
{
	size_t n = p2p_sizes[s].count;
	return n == SIZE_MAX ? large_count(dist_dtype_size(p2p_sizes[s].dtype))
			     : n;
}

/* Every pair exchanges a message both ways, in one global pair order,
 * at every size. */
int body_send_recv(struct dist *d, void *arg)
{
	int w = dist_world_size(d), r = dist_rank(d);
	(void)arg;
	for (size_t s = 0; s < P2P_SIZES; s++) {
		enum dist_dtype dt = p2p_sizes[s].dtype;
		size_t n = p2p_count(s);
		struct tbuf b;
		CHECK(tbuf_new(&b, n * dist_dtype_size(dt)) == 0);
		for (int a = 0; a < w; a++) {
			for (int c = a + 1; c < w; c++) {
				if (r != a && r != c)
					continue;
				int peer = r == a ? c : a;
				for (int dir = 0; dir < 2; dir++) {
					int sender = dir ? c : a;
					unsigned seed = 1 + (unsigned)dir;
					if (r == sender) {
						fill_input(dt, b.host, n, r,
							   seed);
						CHECK(tbuf_put(&b) == 0);
						CHECK_RC(dist_send(d, b.op, n,
								   dt, peer));
						continue;
					}
					CHECK_RC(
					    dist_recv(d, b.op, n, dt, peer));
					CHECK(tbuf_get(&b) == 0);
					CHECK(check_input("recv", dt, b.host, n,
							  peer, seed) == 0);
				}
			}
		}
		tbuf_free(&b);
	}
	/* TCP: a receive of the wrong size is refused, not misread */
	if (dist_get_backend(d) == DIST_BACKEND_TCP && w >= 2 && r < 2) {
		uint8_t small[16] = {0};
		if (r == 0) {
			CHECK_RC(dist_send(d, small, 10, DIST_UINT8, 1));
		} else {
			CHECK(dist_recv(d, small, 11, DIST_UINT8, 0) ==
			      DL_EPROTO);
			CHECK(dist_barrier(d) == DL_EPROTO); /* sticky */
		}
	}
	return 0;
}

/* ring_exchange: isend to rank + 1 and irecv from rank - 1 (at world 2
 * the same peer both ways), posted receive first or send first. With
 * send first on every rank, it completes only if each rank's sends and
 * receives progress together. Waits in the order opposite to posting. */
static int ring_exchange(struct dist *d, size_t n, enum dist_dtype dt,
			 int send_first, unsigned seed)
{
	int w = dist_world_size(d), r = dist_rank(d);
	int right = (r + 1) % w, left = (r + w - 1) % w;
	size_t es = dist_dtype_size(dt);
	struct tbuf sb, rb;
	struct dist_req *sreq = NULL, *rreq = NULL;
	CHECK(tbuf_new(&sb, n * es) == 0);
	CHECK(tbuf_new(&rb, n * es) == 0);
	fill_input(dt, sb.host, n, r, seed);
	CHECK(tbuf_put(&sb) == 0);
	CHECK(tbuf_put(&rb) == 0);
	if (send_first) {
		CHECK_RC(dist_isend(d, sb.op, n, dt, right, &sreq));
		CHECK_RC(dist_irecv(d, rb.op, n, dt, left, &rreq));
		CHECK_RC(dist_wait(rreq));
		CHECK_RC(dist_wait(sreq));
	} else {
		CHECK_RC(dist_irecv(d, rb.op, n, dt, left, &rreq));
		CHECK_RC(dist_isend(d, sb.op, n, dt, right, &sreq));
		CHECK_RC(dist_wait(sreq));
		CHECK_RC(dist_wait(rreq));
	}
	CHECK(tbuf_get(&rb) == 0);
	CHECK(check_input("irecv", dt, rb.host, n, left, seed) == 0);
	tbuf_free(&sb);
	tbuf_free(&rb);
	return 0;
}

/* isend/irecv at every size in both posting orders, then two messages
 * of different sizes to the same peer, which must arrive in the order
 * they were sent. */
int body_isend_irecv(struct dist *d, void *arg)
{
	int w = dist_world_size(d), r = dist_rank(d);
	int right = (r + 1) % w, left = (r + w - 1) % w;
	(void)arg;
	for (size_t s = 0; s < P2P_SIZES; s++) {
		for (int send_first = 0; send_first < 2; send_first++)
			CHECK(ring_exchange(d, p2p_count(s), p2p_sizes[s].dtype,
					    send_first,
					    20 + (unsigned)(2 * s) +
						(unsigned)send_first) == 0);
	}
	struct tbuf s1, s2, r1, r2;
	struct dist_req *reqs[4];
	CHECK(tbuf_new(&s1, 7 * 8) == 0 && tbuf_new(&s2, 8) == 0);
	CHECK(tbuf_new(&r1, 7 * 8) == 0 && tbuf_new(&r2, 8) == 0);
	fill_input(DIST_INT64, s1.host, 7, r, 30);
	fill_input(DIST_INT64, s2.host, 1, r, 31);
	CHECK(tbuf_put(&s1) == 0 && tbuf_put(&s2) == 0);
	CHECK_RC(dist_isend(d, s1.op, 7, DIST_INT64, right, &reqs[0]));
	CHECK_RC(dist_isend(d, s2.op, 1, DIST_INT64, right, &reqs[1]));
	CHECK_RC(dist_irecv(d, r1.op, 7, DIST_INT64, left, &reqs[2]));
	CHECK_RC(dist_irecv(d, r2.op, 1, DIST_INT64, left, &reqs[3]));
	for (int i = 3; i >= 0; i--)
		CHECK_RC(dist_wait(reqs[i]));
	CHECK(tbuf_get(&r1) == 0 && tbuf_get(&r2) == 0);
	CHECK(check_input("irecv", DIST_INT64, r1.host, 7, left, 30) == 0);
	CHECK(check_input("irecv", DIST_INT64, r2.host, 1, left, 31) == 0);
	tbuf_free(&s1);
	tbuf_free(&s2);
	tbuf_free(&r1);
	tbuf_free(&r2);
	return 0;
}

/* Pairs (rank, rank ^ 1) both post their isend first, 8 MB each way;
 * then several iall_reduce in flight waited for out of order, then a
 * blocking one while one is still queued. */
int body_async(struct dist *d, void *arg)
{
	int w = dist_world_size(d), r = dist_rank(d);
	struct dist_req *reqs[3];
	(void)arg;
	if (w % 2 == 0) {
		size_t big = 2u << 20;
		struct tbuf bs, br;
		int peer = r ^ 1;
		CHECK(tbuf_new(&bs, big * 4) == 0 &&
		      tbuf_new(&br, big * 4) == 0);
		fill_input(DIST_INT32, bs.host, big, r, 22);
		CHECK(tbuf_put(&bs) == 0);
		CHECK_RC(dist_isend(d, bs.op, big, DIST_INT32, peer, &reqs[0]));
		CHECK_RC(dist_irecv(d, br.op, big, DIST_INT32, peer, &reqs[1]));
		CHECK_RC(dist_wait(reqs[0]));
		CHECK_RC(dist_wait(reqs[1]));
		CHECK(tbuf_get(&br) == 0);
		CHECK(check_input("irecv", DIST_INT32, br.host, big, peer,
				  22) == 0);
		tbuf_free(&bs);
		tbuf_free(&br);
	}

	size_t sizes[3] = {5, 100000, 3000};
	struct tbuf bufs[3];
	for (int i = 0; i < 3; i++) {
		CHECK(tbuf_new(&bufs[i], sizes[i] * 8) == 0);
		fill_input(DIST_FLOAT64, bufs[i].host, sizes[i], r,
			   30 + (unsigned)i);
		CHECK(tbuf_put(&bufs[i]) == 0);
		CHECK_RC(dist_iall_reduce(d, bufs[i].op, sizes[i], DIST_FLOAT64,
					  DIST_AVG, &reqs[i]));
	}
	for (int i = 2; i >= 0; i--)
		CHECK_RC(dist_wait(reqs[i]));
	for (int i = 0; i < 3; i++) {
		CHECK(tbuf_get(&bufs[i]) == 0);
		CHECK(check_reduced("iall_reduce", DIST_FLOAT64, DIST_AVG, w,
				    bufs[i].host, sizes[i],
				    30 + (unsigned)i) == 0);
	}
	fill_input(DIST_FLOAT64, bufs[1].host, sizes[1], r, 40);
	fill_input(DIST_FLOAT64, bufs[2].host, sizes[2], r, 41);
	CHECK(tbuf_put(&bufs[1]) == 0 && tbuf_put(&bufs[2]) == 0);
	CHECK_RC(dist_iall_reduce(d, bufs[1].op, sizes[1], DIST_FLOAT64,
				  DIST_SUM, &reqs[0]));
	CHECK_RC(dist_all_reduce(d, bufs[2].op, bufs[2].op, sizes[2],
				 DIST_FLOAT64, DIST_SUM));
	CHECK_RC(dist_wait(reqs[0]));
	CHECK(tbuf_get(&bufs[1]) == 0 && tbuf_get(&bufs[2]) == 0);
	CHECK(check_reduced("iall_reduce", DIST_FLOAT64, DIST_SUM, w,
			    bufs[1].host, sizes[1], 40) == 0);
	CHECK(check_reduced("all_reduce", DIST_FLOAT64, DIST_SUM, w,
			    bufs[2].host, sizes[2], 41) == 0);
	for (int i = 0; i < 3; i++)
		tbuf_free(&bufs[i]);
	return 0;
}

/* Barrier: after it, every rank has arrived (a shared-memory count). */
int body_barrier(struct dist *d, void *arg)
{
	int *arrived = arg;
	int w = dist_world_size(d), r = dist_rank(d);
	for (int round = 0; round < 20; round++) {
		volatile double spin = 0;
		for (int i = 0; i < (r + round) % w * 20000; i++)
			spin += i; /* ranks arrive at different times */
		__atomic_add_fetch(&arrived[round], 1, __ATOMIC_SEQ_CST);
		CHECK_RC(dist_barrier(d));
		CHECK(__atomic_load_n(&arrived[round], __ATOMIC_SEQ_CST) == w);
	}
	return 0;
}
