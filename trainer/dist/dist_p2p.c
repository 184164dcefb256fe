/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_p2p.c - point-to-point sends and receives of the TCP backend.
 *
 * A message is a 16-byte header (magic, dtype, byte count) and the
 * payload; the receiver checks the header against what it expects, so a
 * size or type mismatch is an error naming both sides instead of a
 * silently misread stream. Blocking send/recv run on the caller's thread.
 * Asynchronous ones (isend/irecv) run on the progress thread in batches:
 * every send and receive at the head of the queue progresses at once, so
 * a rank may post irecv before isend (or both ranks may post isend first)
 * without the exchange deadlocking on full socket buffers.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "dist_priv.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define P2P_MAGIC 0x444c5032u /* "DLP2" */

static void put_u32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (24 - 8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | p[3];
}

static void p2p_start(struct dist_p2p *x, int sending, int peer, void *buf,
		      size_t bytes, enum dist_dtype dtype)
{
	memset(x, 0, sizeof(*x));
	x->sending = sending;
	x->peer = peer;
	x->buf = buf;
	x->bytes = bytes;
	x->dtype = dtype;
	if (sending) {
		put_u32(x->hdr, P2P_MAGIC);
		put_u32(x->hdr + 4, (uint32_t)dtype);
		put_u32(x->hdr + 8, (uint32_t)((uint64_t)bytes >> 32));
		put_u32(x->hdr + 12, (uint32_t)bytes);
	}
}

static int p2p_done(const struct dist_p2p *x)
{
	return x->hdr_done == DIST_P2P_HEADER_BYTES && x->done == x->bytes;
}

static int check_header(struct dist *d, const struct dist_p2p *x)
{
	const unsigned char *h = x->hdr;
	uint64_t sent = ((uint64_t)get_u32(h + 8) << 32) | get_u32(h + 12);
	if (get_u32(h) != P2P_MAGIC) {
		log_error("dist: rank %d: recv from rank %d: the peer is not "
			  "in a send (is it in a collective?)",
			  d->rank, x->peer);
		d->failed = DL_EPROTO;
		return DL_EPROTO;
	}
	if (get_u32(h + 4) != (uint32_t)x->dtype || sent != x->bytes) {
		log_error("dist: rank %d: recv from rank %d: it sent %llu "
			  "bytes of dtype %u, this rank expects %zu bytes of "
			  "dtype %d",
			  d->rank, x->peer, (unsigned long long)sent,
			  get_u32(h + 4), x->bytes, (int)x->dtype);
		d->failed = DL_EPROTO;
		return DL_EPROTO;
	}
	return 0;
}

/* p2p_progress: moves what the socket takes or gives without blocking.
 * Returns 0 (*moved tells whether anything moved) or a DL_E* code. */
static int p2p_progress(struct dist *d, struct dist_p2p *x, int *moved)
{
	int fd = d->fds[x->peer];
	const char *what = x->sending ? "send" : "recv";
	*moved = 0;
	while (!p2p_done(x)) {
		int in_hdr = x->hdr_done < DIST_P2P_HEADER_BYTES;
		unsigned char *p =
		    in_hdr ? x->hdr + x->hdr_done : x->buf + x->done;
		size_t len = in_hdr ? DIST_P2P_HEADER_BYTES - x->hdr_done
				    : x->bytes - x->done;
		ssize_t k = x->sending
				? send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL)
				: recv(fd, p, len, MSG_DONTWAIT);
		if (k > 0) {
			*moved = 1;
			if (!in_hdr) {
				x->done += (size_t)k;
				continue;
			}
			x->hdr_done += (size_t)k;
			if (!x->sending &&
			    x->hdr_done == DIST_P2P_HEADER_BYTES) {
				int rc = check_header(d, x);
				if (rc != 0)
					return rc;
			}
			continue;
		}
		if (k == 0 && !x->sending)
			return dist_io_fail(d, DL_ECLOSED, x->peer, what);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		return dist_io_fail(d,
				    errno == EPIPE || errno == ECONNRESET
					? DL_ECLOSED
					: DL_ESYS,
				    x->peer, what);
	}
	return 0;
}

static int poll_timeout(const struct dist *d)
{
	return d->timeout_ms > 1000000000 ? 1000000000 : (int)d->timeout_ms;
}

static int p2p_blocking(struct dist *d, struct dist_p2p *x)
{
	while (!p2p_done(x)) {
		int moved, rc = p2p_progress(d, x, &moved);
		if (rc != 0)
			return rc;
		if (moved || p2p_done(x))
			continue;
		struct pollfd pfd = {d->fds[x->peer],
				     x->sending ? POLLOUT : POLLIN, 0};
		rc = poll(&pfd, 1, poll_timeout(d));
		if (rc == 0)
			return dist_io_fail(d, DL_ETIMEDOUT, x->peer,
					    x->sending ? "send" : "recv");
		if (rc < 0 && errno != EINTR)
			return dist_io_fail(d, DL_ESYS, x->peer, "poll");
	}
	return 0;
}

int dist_tcp_send(struct dist *d, const void *buf, size_t bytes,
		  enum dist_dtype dtype, int peer)
{
	struct dist_p2p x;
	p2p_start(&x, 1, peer, (void *)(uintptr_t)buf, bytes, dtype);
	return p2p_blocking(d, &x);
}

int dist_tcp_recv(struct dist *d, void *buf, size_t bytes,
		  enum dist_dtype dtype, int peer)
{
	struct dist_p2p x;
	p2p_start(&x, 0, peer, buf, bytes, dtype);
	return p2p_blocking(d, &x);
}

static int is_p2p(const struct dist_req *req)
{
	return req->kind == DIST_REQ_SEND || req->kind == DIST_REQ_RECV;
}

/* complete: under d->mu; takes req out of the queue and publishes its
 * status (dist_wait may free it from then on). */
static void complete(struct dist *d, struct dist_req *req, int status)
{
	struct dist_req **pp = &d->queue_head, *prev = NULL;
	while (*pp && *pp != req) {
		prev = *pp;
		pp = &(*pp)->next_queued;
	}
	if (*pp == req) {
		*pp = req->next_queued;
		if (d->queue_tail == req)
			d->queue_tail = prev;
	}
	req->status = status;
	req->done = 1;
}

/* snapshot: under d->mu; the queue's prefix of sends and receives into
 * d->batch, starting those not yet started. Returns how many, or -1 when
 * out of memory. */
static long snapshot(struct dist *d)
{
	size_t n = 0;
	for (struct dist_req *r = d->queue_head; r && is_p2p(r);
	     r = r->next_queued) {
		if (n == d->batch_cap) {
			size_t cap = d->batch_cap ? 2 * d->batch_cap : 16;
			void *grown =
			    realloc(d->batch, cap * sizeof(*d->batch));
			if (grown == NULL)
				return -1;
			d->batch = grown;
			d->batch_cap = cap;
		}
		if (!r->p2p_started) {
			p2p_start(&r->p2p, r->kind == DIST_REQ_SEND, r->peer,
				  r->buf, r->count * dist_dtype_size(r->dtype),
				  r->dtype);
			r->p2p_started = 1;
		}
		d->batch[n++] = r;
	}
	return (long)n;
}

/* is_active: the first unfinished request of its peer and direction. */
static int is_active(struct dist_req **batch, long i)
{
	for (long j = 0; j < i; j++)
		if (batch[j]->peer == batch[i]->peer &&
		    batch[j]->kind == batch[i]->kind)
			return 0;
	return 1;
}

/* wait_batch: sleeps until one of the npoll sockets in pfds (which has
 * room for one more) can move, or a request is queued (the wake pipe);
 * silence past the timeout fails the group, naming wait_peer. */
static int wait_batch(struct dist *d, struct pollfd *pfds, long npoll,
		      int wait_peer, const char *wait_what)
{
	pfds[npoll++] = (struct pollfd){d->wake_fds[0], POLLIN, 0};
	int rc = poll(pfds, (nfds_t)npoll, poll_timeout(d));
	if (rc == 0)
		return dist_io_fail(d, DL_ETIMEDOUT, wait_peer, wait_what);
	if (rc < 0 && errno != EINTR)
		return dist_io_fail(d, DL_ESYS, -1, "poll");
	if (rc > 0 && (pfds[npoll - 1].revents & POLLIN)) {
		char drain[64];
		while (read(d->wake_fds[0], drain, sizeof(drain)) > 0)
			;
	}
	return 0;
}

void dist_p2p_run_batch(struct dist *d)
{
	struct pollfd *pfds = NULL;
	size_t pfds_cap = 0;
	d->in_batch = 1;
	for (;;) {
		if (d->stopping && d->queue_head != NULL &&
		    is_p2p(d->queue_head)) {
			/* dist_free with requests not waited for: cancel */
			complete(d, d->queue_head, DL_ECLOSED);
			pthread_cond_broadcast(&d->cv);
			continue;
		}
		long n = snapshot(d);
		if (n <= 0) {
			if (n < 0) /* out of memory: fail the head */
				complete(d, d->queue_head, DL_ENOMEM);
			break;
		}
		pthread_mutex_unlock(&d->mu);
		int any_moved = 0, failed = d->failed, wait_peer = -1;
		const char *wait_what = "irecv";
		long npoll = 0;
		if ((size_t)n + 1 > pfds_cap) {
			void *grown =
			    realloc(pfds, ((size_t)n + 1) * sizeof(*pfds));
			if (grown == NULL) {
				failed = DL_ENOMEM;
			} else {
				pfds = grown;
				pfds_cap = (size_t)n + 1;
			}
		}
		for (long i = 0; i < n && !failed; i++) {
			struct dist_req *r = d->batch[i];
			int moved = 0;
			if (!is_active(d->batch, i))
				continue;
			int rc = p2p_progress(d, &r->p2p, &moved);
			if (rc != 0) {
				failed = rc;
				break;
			}
			any_moved |= moved;
			if (p2p_done(&r->p2p))
				continue;
			pfds[npoll++] = (struct pollfd){
			    d->fds[r->peer], r->p2p.sending ? POLLOUT : POLLIN,
			    0};
			if (wait_peer < 0) {
				wait_peer = r->peer;
				wait_what = r->p2p.sending ? "isend" : "irecv";
			}
		}
		if (!failed && !any_moved && npoll > 0)
			failed =
			    wait_batch(d, pfds, npoll, wait_peer, wait_what);
		pthread_mutex_lock(&d->mu);
		for (long i = 0; i < n; i++) {
			struct dist_req *r = d->batch[i];
			if (failed)
				complete(d, r, failed);
			else if (p2p_done(&r->p2p))
				complete(d, r, 0);
		}
		pthread_cond_broadcast(&d->cv);
	}
	d->in_batch = 0;
	free(pfds);
}
