/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_tcp.c - the collective algorithms of the TCP backend on host
 * buffers, over the full mesh that dist_net.c forms.
 *
 * Everything moves through one engine, ring_exec: a sequence of steps,
 * each sending a byte range to one peer while receiving a byte range from
 * another, either copied in place or reduced into the destination through
 * a bounded receive ring (d->scratch). A step's sends may wait on the
 * previous (or the same) step's received bytes, which pipelines the ring
 * at the granularity of whatever the kernel hands over: the first bytes
 * of a segment travel on while its tail is still arriving. All sockets are
 * non-blocking; the engine polls only when neither direction can move, and
 * a poll silent for the group's timeout ends the operation.
 *
 * Algorithms:
 *   all-reduce  small messages: recursive doubling (power-of-two worlds)
 *               or reduce-to-0 plus broadcast; large: ring reduce-scatter
 *               then all-gather. Every variant fixes the operand order so
 *               all ranks hold the same bits.
 *   broadcast   small: the root sends to each rank; large: a pipelined
 *               chain root, root+1, ...
 *   all-gather  ring.
 *   reduce      small: every rank sends to the root, which folds in rank
 *               order; large: ring reduce-scatter, then each rank sends
 *               the segments it owns to the root.
 *   barrier     an all-reduce of one integer.
 *
 * An I/O failure leaves the byte streams out of step, so it marks the
 * group failed: later operations return that error at once.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dist_priv.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define SMALL_ALLREDUCE_BYTES (64u << 10)
#define SMALL_BROADCAST_BYTES (64u << 10)
#define RING_SEGMENT_BYTES    (256u << 10)
#define RING_SKEW	      2

struct ring_step {
	const unsigned char *send;
	size_t send_len;
	/* the step (this one or an earlier one) whose received bytes this
	 * step sends on: its sends never pass that step's processed bytes;
	 * -1: the bytes are ready from the start */
	int dep;
	unsigned char *recv;
	size_t recv_len;
	/* reduce mode: recv = reduce_a op incoming (reduce_a == recv: in
	 * place); NULL: the incoming bytes are stored as they are */
	const unsigned char *reduce_a;
	int scale; /* divide the reduced bytes by the world size (AVG) */
};

struct ring_run {
	struct dist *d;
	const char *what;
	int peer_out, peer_in; /* -1 when this rank only receives/sends */
	struct ring_step *steps;
	int nsteps;
	enum dist_dtype dtype;
	enum dist_op op;
	int count_fault; /* a ring all-reduce: the fault hook applies */
};

int dist_io_fail(struct dist *d, int rc, int peer, const char *what)
{
	if (d->failed)
		return rc;
	d->failed = rc;
	if (atomic_load(&d->aborted))
		log_info("dist: rank %d: %s cancelled: the group was aborted",
			 d->rank, what);
	else if (rc == DL_ECLOSED)
		log_error("dist: rank %d: %s: rank %d closed its connection "
			  "(did it exit?)",
			  d->rank, what, peer);
	else if (rc == DL_ETIMEDOUT)
		log_error("dist: rank %d: %s: timed out: nothing from rank %d "
			  "for %llu ms (is it stuck or in a different "
			  "operation?)",
			  d->rank, what, peer,
			  (unsigned long long)d->timeout_ms);
	else
		log_error("dist: rank %d: %s with rank %d: %s", d->rank, what,
			  peer, dl_strerror(rc));
	return rc;
}

static size_t send_limit(const struct ring_run *rr, int ts, int tr, size_t rq)
{
	const struct ring_step *s = &rr->steps[ts];
	if (s->dep < 0 || tr > s->dep)
		return s->send_len;
	if (tr < s->dep)
		return 0;
	return rq < s->send_len ? rq : s->send_len;
}

/* reduce_piece: folds received bytes [rq, rq + m) of step s, held in the
 * receive ring at tmp, into the destination. */
static void reduce_piece(const struct ring_run *rr, const struct ring_step *s,
			 size_t rq, const unsigned char *tmp, size_t m)
{
	size_t es = dist_dtype_size(rr->dtype);
	if (s->reduce_a == s->recv)
		dist_reduce_into(rr->dtype, rr->op, s->recv + rq, tmp, m / es,
				 0);
	else
		dist_reduce_to(rr->dtype, rr->op, s->recv + rq,
			       s->reduce_a + rq, tmp, m / es);
	if (s->scale)
		dist_reduce_scale(rr->dtype, s->recv + rq, m / es,
				  rr->d->world);
}

/* fault_due: the DLAUNCH_DIST_FAULT hook (dist.h): a ring all-reduce
 * whose sends have passed its plan step d->fault_step (ts: the step being
 * sent), whatever it has received; fires once per process */
static int fault_due(const struct ring_run *rr, int ts)
{
	static atomic_int fired;
	struct dist *d = rr->d;

	if (!rr->count_fault || d->fault_call != d->ring_calls ||
	    ts <= d->fault_step || atomic_exchange(&fired, 1))
		return 0;
	log_warn("dist: rank %d: DLAUNCH_DIST_FAULT: failing ring all-reduce "
		 "%d after sending its step %d%s",
		 d->rank, d->ring_calls, d->fault_step,
		 d->fault_kill ? " (kill)" : "");
	if (d->fault_kill)
		raise(SIGKILL);
	dist_abort(d);
	return 1;
}

static int ring_exec(const struct ring_run *rr)
{
	struct dist *d = rr->d;
	const size_t cap = DIST_SCRATCH_BYTES;
	const size_t es = dist_dtype_size(rr->dtype);
	int fd_out = rr->peer_out >= 0 ? d->fds[rr->peer_out] : -1;
	int fd_in = rr->peer_in >= 0 ? d->fds[rr->peer_in] : -1;
	int n = rr->nsteps, ts = 0, tr = 0;
	size_t so = 0, ro = 0, rq = 0;

	for (;;) {
		while (ts < n && so == rr->steps[ts].send_len) {
			ts++;
			so = 0;
		}
		while (tr < n && rq == rr->steps[tr].recv_len) {
			tr++;
			ro = rq = 0;
		}
		if (rr->count_fault && fault_due(rr, ts))
			return dist_io_fail(d, DL_ECLOSED, rr->peer_in,
					    rr->what);
		if (ts == n && tr == n)
			return 0;
		int progress = 0, want_out = 0, want_in = 0;
		if (ts < n) {
			size_t limit = send_limit(rr, ts, tr, rq);
			if (so < limit) {
				ssize_t k = send(
				    fd_out, rr->steps[ts].send + so, limit - so,
				    MSG_DONTWAIT | MSG_NOSIGNAL);
				if (k > 0) {
					so += (size_t)k;
					progress = 1;
				} else if (errno == EAGAIN ||
					   errno == EWOULDBLOCK) {
					want_out = 1;
				} else if (errno != EINTR) {
					return dist_io_fail(
					    d,
					    errno == EPIPE ||
						    errno == ECONNRESET
						? DL_ECLOSED
						: DL_ESYS,
					    rr->peer_out, rr->what);
				}
			}
		}
		if (tr < n) {
			const struct ring_step *s = &rr->steps[tr];
			unsigned char *dst;
			size_t room;
			if (s->reduce_a == NULL) {
				dst = s->recv + ro;
				room = s->recv_len - ro;
			} else {
				size_t pos = ro % cap;
				dst = d->scratch + pos;
				room = s->recv_len - ro;
				if (room > cap - pos)
					room = cap - pos;
				if (room > cap - (ro - rq))
					room = cap - (ro - rq);
			}
			ssize_t k =
			    room ? recv(fd_in, dst, room, MSG_DONTWAIT) : -1;
			if (k > 0) {
				ro += (size_t)k;
				progress = 1;
				if (s->reduce_a == NULL) {
					rq = ro;
				} else {
					while (ro - rq >= es) {
						size_t p = rq % cap;
						size_t m = ro - rq;
						if (m > cap - p)
							m = cap - p;
						m -= m % es;
						reduce_piece(rr, s, rq,
							     d->scratch + p, m);
						rq += m;
					}
				}
			} else if (k == 0) {
				return dist_io_fail(d, DL_ECLOSED, rr->peer_in,
						    rr->what);
			} else if (room &&
				   (errno == EAGAIN || errno == EWOULDBLOCK)) {
				want_in = 1;
			} else if (room && errno != EINTR) {
				return dist_io_fail(
				    d,
				    errno == ECONNRESET ? DL_ECLOSED : DL_ESYS,
				    rr->peer_in, rr->what);
			}
		}
		if (progress)
			continue;
		struct pollfd pfds[2];
		nfds_t np = 0;
		if (want_out)
			pfds[np++] = (struct pollfd){fd_out, POLLOUT, 0};
		if (want_in) {
			if (np == 1 && fd_in == fd_out)
				pfds[0].events |= POLLIN;
			else
				pfds[np++] = (struct pollfd){fd_in, POLLIN, 0};
		}
		if (np == 0) /* cannot happen: a blocked send waits on recv */
			return dist_io_fail(d, DL_EPROTO, rr->peer_in,
					    rr->what);
		int timeout = d->timeout_ms > 1000000000 ? 1000000000
							 : (int)d->timeout_ms;
		int rc = poll(pfds, np, timeout);
		if (rc == 0)
			return dist_io_fail(
			    d, DL_ETIMEDOUT,
			    want_in ? rr->peer_in : rr->peer_out, rr->what);
		if (rc < 0 && errno != EINTR)
			return dist_io_fail(d, DL_ESYS, rr->peer_in, rr->what);
	}
}

/* One-step transfers: a plain send, receive or exchange of raw bytes. */
static int xfer(struct dist *d, const char *what, int peer_out,
		const void *sbuf, size_t slen, int peer_in, void *rbuf,
		size_t rlen)
{
	struct ring_step step = {
	    .send = sbuf,
	    .send_len = slen,
	    .dep = -1,
	    .recv = rbuf,
	    .recv_len = rlen,
	};
	struct ring_run rr = {
	    .d = d,
	    .what = what,
	    .peer_out = peer_out,
	    .peer_in = peer_in,
	    .steps = &step,
	    .nsteps = 1,
	    .dtype = DIST_UINT8,
	    .op = DIST_SUM,
	};
	return ring_exec(&rr);
}

static int is_power_of_two(int x)
{
	return x > 0 && (x & (x - 1)) == 0;
}

/* Small all-reduce, power-of-two worlds: at each step partners swap their
 * partial results and both compute lower-ranks' op higher-ranks'. */
static int allreduce_doubling(struct dist *d, unsigned char *acc, size_t count,
			      enum dist_dtype dtype, enum dist_op op)
{
	size_t bytes = count * dist_dtype_size(dtype);
	for (int mask = 1; mask < d->world; mask <<= 1) {
		int partner = d->rank ^ mask;
		int rc = xfer(d, "all_reduce", partner, acc, bytes, partner,
			      d->scratch, bytes);
		if (rc != 0)
			return rc;
		dist_reduce_into(dtype, op, acc, d->scratch, count,
				 partner < d->rank);
	}
	if (op == DIST_AVG)
		dist_reduce_scale(dtype, acc, count, d->world);
	return 0;
}

/* Small all-reduce, other worlds: rank 0 folds the others' data in rank
 * order and sends the result back. */
static int allreduce_star(struct dist *d, const void *send, unsigned char *acc,
			  size_t count, enum dist_dtype dtype, enum dist_op op)
{
	size_t bytes = count * dist_dtype_size(dtype);
	int rc = 0;
	if (d->rank != 0) {
		rc = xfer(d, "all_reduce", 0, send, bytes, -1, NULL, 0);
		if (rc == 0)
			rc = xfer(d, "all_reduce", -1, NULL, 0, 0, acc, bytes);
		return rc;
	}
	for (int p = 1; p < d->world && rc == 0; p++) {
		rc = xfer(d, "all_reduce", -1, NULL, 0, p, d->scratch, bytes);
		if (rc == 0)
			dist_reduce_into(dtype, op, acc, d->scratch, count, 0);
	}
	if (rc == 0 && op == DIST_AVG)
		dist_reduce_scale(dtype, acc, count, d->world);
	for (int p = 1; p < d->world && rc == 0; p++)
		rc = xfer(d, "all_reduce", p, acc, bytes, -1, NULL, 0);
	return rc;
}

static size_t seg_off(size_t count, int world, int seg)
{
	size_t base = count / (size_t)world, rem = count % (size_t)world;
	return (size_t)seg * base + ((size_t)seg < rem ? (size_t)seg : rem);
}

static size_t seg_len(size_t count, int world, int seg)
{
	size_t base = count / (size_t)world, rem = count % (size_t)world;
	return base + ((size_t)seg < rem ? 1 : 0);
}

/* Large all-reduce: the buffer is cut into rounds of world_size segments
 * of about RING_SEGMENT_BYTES; each round is a ring reduce-scatter then a
 * ring all-gather, 2(N-1) steps, step t sending on what step t-1
 * received. Small rounds keep what a rank forwards in cache between the
 * moment it is reduced and the moment it is sent on. The rounds' steps
 * are interleaved in a skewed order (step t of round k at position
 * k + RING_SKEW * t), the same on every rank, so the step a send waits on
 * was received RING_SKEW diagonals earlier: the ring does not stall on
 * every hop waiting for the neighbour to be scheduled.
 *
 * ring_plan builds those steps (only the N-1 reduce-scatter ones when
 * rs_only: then rank r ends with segment r+1 of every round reduced in
 * recv); *out is the caller's to free. */
static int ring_plan(struct dist *d, const unsigned char *send,
		     unsigned char *recv, size_t count, enum dist_dtype dtype,
		     enum dist_op op, int rs_only, struct ring_run *out)
{
	int w = d->world, r = d->rank;
	int per_round = rs_only ? w - 1 : 2 * (w - 1);
	size_t es = dist_dtype_size(dtype);
	size_t round_elems = RING_SEGMENT_BYTES / es * (size_t)w;
	size_t rounds = (count + round_elems - 1) / round_elems;
	size_t nsteps = rounds * (size_t)per_round, at = 0;
	struct ring_step *steps = calloc(nsteps, sizeof(*steps));
	int *index = malloc(nsteps * sizeof(*index)); /* (k, t) -> step */
	if (steps == NULL || index == NULL || nsteps > INT32_MAX) {
		free(steps);
		free(index);
		return DL_ENOMEM;
	}
	for (size_t key = 0; at < nsteps; key++) {
		for (int t = per_round - 1; t >= 0; t--) {
			if (key < RING_SKEW * (size_t)t ||
			    key - RING_SKEW * (size_t)t >= rounds)
				continue;
			size_t k = key - RING_SKEW * (size_t)t;
			size_t base = k * round_elems;
			size_t len = count - base < round_elems ? count - base
								: round_elems;
			int ss = ((r - t) % w + w) % w;
			int sr = ((r - t - 1) % w + w) % w;
			size_t soff = (base + seg_off(len, w, ss)) * es;
			size_t roff = (base + seg_off(len, w, sr)) * es;
			struct ring_step *s = &steps[at];
			index[k * (size_t)per_round + (size_t)t] = (int)at;
			s->send = (t == 0 ? send : recv) + soff;
			s->send_len = seg_len(len, w, ss) * es;
			s->dep =
			    t == 0
				? -1
				: index[k * (size_t)per_round + (size_t)t - 1];
			s->recv = recv + roff;
			s->recv_len = seg_len(len, w, sr) * es;
			if (t < w - 1) {
				s->reduce_a = send + roff;
				s->scale = op == DIST_AVG && t == w - 2;
			}
			at++;
		}
	}
	free(index);
	*out = (struct ring_run){
	    .d = d,
	    .what = rs_only ? "reduce" : "all_reduce",
	    .peer_out = (r + 1) % w,
	    .peer_in = (r + w - 1) % w,
	    .steps = steps,
	    .nsteps = (int)nsteps,
	    .dtype = dtype,
	    .op = op,
	};
	return 0;
}

static int allreduce_ring(struct dist *d, const unsigned char *send,
			  unsigned char *recv, size_t count,
			  enum dist_dtype dtype, enum dist_op op)
{
	struct ring_run rr;
	int rc = ring_plan(d, send, recv, count, dtype, op, 0, &rr);
	if (rc == 0) {
		d->ring_calls++;
		rr.count_fault = d->fault_call > 0;
		rc = ring_exec(&rr);
	}
	free(rr.steps);
	return rc;
}

int dist_tcp_all_reduce(struct dist *d, const void *send, void *recv,
			size_t count, enum dist_dtype dtype, enum dist_op op)
{
	size_t bytes = count * dist_dtype_size(dtype);
	if (count == 0)
		return 0;
	if (d->world == 1) {
		if (send != recv)
			memcpy(recv, send, bytes);
		return 0;
	}
	if (bytes <= SMALL_ALLREDUCE_BYTES || count < (size_t)d->world) {
		if (send != recv && (is_power_of_two(d->world) || d->rank == 0))
			memcpy(recv, send, bytes);
		if (is_power_of_two(d->world))
			return allreduce_doubling(d, recv, count, dtype, op);
		return allreduce_star(d, send, recv, count, dtype, op);
	}
	return allreduce_ring(d, send, recv, count, dtype, op);
}

/* Small reduce: the root folds the others' data in rank order. */
static int reduce_star(struct dist *d, const void *send, unsigned char *recv,
		       size_t count, enum dist_dtype dtype, enum dist_op op,
		       int root)
{
	size_t bytes = count * dist_dtype_size(dtype);
	int rc = 0;
	if (d->rank != root)
		return xfer(d, "reduce", root, send, bytes, -1, NULL, 0);
	if (send != recv)
		memcpy(recv, send, bytes);
	for (int p = 0; p < d->world && rc == 0; p++) {
		if (p == root)
			continue;
		rc = xfer(d, "reduce", -1, NULL, 0, p, d->scratch, bytes);
		if (rc == 0)
			dist_reduce_into(dtype, op, recv, d->scratch, count, 0);
	}
	if (rc == 0 && op == DIST_AVG)
		dist_reduce_scale(dtype, recv, count, d->world);
	return rc;
}

/* gather_owned: after a reduce-scatter plan, every rank but the root
 * sends the segments it owns (segment p+1 of every round) to the root,
 * which receives them from each rank in turn into recv. */
static int gather_owned(struct dist *d, unsigned char *recv, size_t count,
			enum dist_dtype dtype, int root)
{
	int w = d->world;
	size_t es = dist_dtype_size(dtype);
	size_t round_elems = RING_SEGMENT_BYTES / es * (size_t)w;
	size_t rounds = (count + round_elems - 1) / round_elems;
	struct ring_step *steps = calloc(rounds, sizeof(*steps));
	int rc = 0;
	if (steps == NULL)
		return DL_ENOMEM;
	for (int p = 0; p < w && rc == 0; p++) {
		if (p == root || (d->rank != root && d->rank != p))
			continue;
		int seg = (p + 1) % w;
		for (size_t k = 0; k < rounds; k++) {
			size_t base = k * round_elems;
			size_t len = count - base < round_elems ? count - base
								: round_elems;
			unsigned char *at =
			    recv + (base + seg_off(len, w, seg)) * es;
			size_t n = seg_len(len, w, seg) * es;
			steps[k] = (struct ring_step){.dep = -1};
			if (d->rank == root) {
				steps[k].recv = at;
				steps[k].recv_len = n;
			} else {
				steps[k].send = at;
				steps[k].send_len = n;
			}
		}
		struct ring_run rr = {
		    .d = d,
		    .what = "reduce",
		    .peer_out = d->rank == root ? -1 : root,
		    .peer_in = d->rank == root ? p : -1,
		    .steps = steps,
		    .nsteps = (int)rounds,
		    .dtype = DIST_UINT8,
		    .op = DIST_SUM,
		};
		rc = ring_exec(&rr);
	}
	free(steps);
	return rc;
}

int dist_tcp_reduce(struct dist *d, const void *send, void *recv, size_t count,
		    enum dist_dtype dtype, enum dist_op op, int root)
{
	size_t bytes = count * dist_dtype_size(dtype);
	void *work = NULL;
	struct ring_run rr = {0};
	int rc;
	if (count == 0)
		return 0;
	if (d->world == 1) {
		if (send != recv)
			memcpy(recv, send, bytes);
		return 0;
	}
	if (bytes <= SMALL_ALLREDUCE_BYTES || count < (size_t)d->world)
		return reduce_star(d, send, recv, count, dtype, op, root);
	/* large: ring reduce-scatter, then the owners send to the root; a
	 * rank other than the root needs a whole buffer to work in */
	if (recv == NULL) {
		work = malloc(bytes);
		if (work == NULL)
			return DL_ENOMEM;
		recv = work;
	}
	rc = ring_plan(d, send, recv, count, dtype, op, 1, &rr);
	if (rc == 0)
		rc = ring_exec(&rr);
	if (rc == 0)
		rc = gather_owned(d, recv, count, dtype, root);
	free(rr.steps);
	free(work);
	return rc;
}

int dist_tcp_broadcast(struct dist *d, void *buf, size_t bytes, int root)
{
	int w = d->world, rc = 0;
	if (w == 1 || bytes == 0)
		return 0;
	if (bytes <= SMALL_BROADCAST_BYTES) {
		if (d->rank != root)
			return xfer(d, "broadcast", -1, NULL, 0, root, buf,
				    bytes);
		for (int p = 0; p < w && rc == 0; p++)
			if (p != root)
				rc = xfer(d, "broadcast", p, buf, bytes, -1,
					  NULL, 0);
		return rc;
	}
	/* a pipelined chain in rank order starting at the root */
	int v = (d->rank - root + w) % w;
	struct ring_step step = {
	    .send = buf,
	    .send_len = v < w - 1 ? bytes : 0,
	    .dep = v > 0 ? 0 : -1,
	    .recv = buf,
	    .recv_len = v > 0 ? bytes : 0,
	};
	struct ring_run rr = {
	    .d = d,
	    .what = "broadcast",
	    .peer_out = v < w - 1 ? (d->rank + 1) % w : -1,
	    .peer_in = v > 0 ? (d->rank + w - 1) % w : -1,
	    .steps = &step,
	    .nsteps = 1,
	    .dtype = DIST_UINT8,
	    .op = DIST_SUM,
	};
	return ring_exec(&rr);
}

int dist_tcp_all_gather(struct dist *d, const void *send, void *recv,
			size_t bytes)
{
	int w = d->world, r = d->rank, nsteps = w - 1;
	unsigned char *out = recv;
	if (bytes == 0)
		return 0;
	if (out + (size_t)r * bytes != send)
		memmove(out + (size_t)r * bytes, send, bytes);
	if (w == 1)
		return 0;
	struct ring_step *steps = calloc((size_t)nsteps, sizeof(*steps));
	if (steps == NULL)
		return DL_ENOMEM;
	for (int t = 0; t < nsteps; t++) {
		int ss = ((r - t) % w + w) % w, sr = ((r - t - 1) % w + w) % w;
		steps[t].send = out + (size_t)ss * bytes;
		steps[t].send_len = bytes;
		steps[t].dep = t - 1;
		steps[t].recv = out + (size_t)sr * bytes;
		steps[t].recv_len = bytes;
	}
	struct ring_run rr = {
	    .d = d,
	    .what = "all_gather",
	    .peer_out = (r + 1) % w,
	    .peer_in = (r + w - 1) % w,
	    .steps = steps,
	    .nsteps = nsteps,
	    .dtype = DIST_UINT8,
	    .op = DIST_SUM,
	};
	int rc = ring_exec(&rr);
	free(steps);
	return rc;
}

int dist_tcp_barrier(struct dist *d)
{
	int32_t token = 1;
	return dist_tcp_all_reduce(d, &token, &token, 1, DIST_INT32, DIST_SUM);
}
