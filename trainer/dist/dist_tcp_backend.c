/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_tcp_backend.c - the TCP backend's table (struct dist_ops) and its
 * asynchronous operations.
 *
 * Blocking operations run on the caller's thread (no hand-off, so no added
 * latency) after the progress queue has drained: mixing them with
 * operations in flight is allowed, and the blocking one simply starts
 * after them. Asynchronous operations (isend, irecv, iall_reduce) are
 * queued and run in issue order by one progress thread per group, started
 * on first use; consecutive sends and receives at the head of the queue
 * run together (dist_p2p_run_batch). The algorithms themselves are in
 * dist_tcp.c and dist_p2p.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dist_priv.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

/* ready: waits for the progress queue to drain, then reports the group's
 * sticky failure, if any. Caller's thread only. */
static int ready(struct dist *d)
{
	int failed;
	pthread_mutex_lock(&d->mu);
	while (d->queue_head != NULL || d->running)
		pthread_cond_wait(&d->cv, &d->mu);
	failed = d->failed;
	pthread_mutex_unlock(&d->mu);
	if (failed)
		log_debug("dist: rank %d: the group failed earlier (%s)",
			  d->rank, dl_strerror(failed));
	return failed;
}

/* ---- the progress thread ---- */

/* run_all_reduce: an iall_reduce, on the progress thread */
static int run_all_reduce(struct dist *d, struct dist_req *req)
{
	if (d->failed)
		return d->failed;
	return dist_tcp_all_reduce(d, req->buf, req->buf, req->count,
				   req->dtype, req->op);
}

static void *progress_main(void *arg)
{
	struct dist *d = arg;
	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (d->queue_head == NULL && !d->stopping)
			pthread_cond_wait(&d->cv, &d->mu);
		struct dist_req *req = d->queue_head;
		if (req == NULL)
			break;
		d->running = 1;
		if (req->kind != DIST_REQ_ALL_REDUCE && !d->stopping) {
			dist_p2p_run_batch(d);
			d->running = 0;
			pthread_cond_broadcast(&d->cv);
			continue;
		}
		pthread_mutex_unlock(&d->mu);
		int status = d->stopping ? DL_ECLOSED : run_all_reduce(d, req);
		if (status == 0) /* when it completed, not when waited for */
			dist_flight_finish(d->flight, req->flight);
		pthread_mutex_lock(&d->mu);
		d->queue_head = req->next_queued;
		if (d->queue_head == NULL)
			d->queue_tail = NULL;
		d->running = 0;
		req->status = status;
		req->done = 1;
		pthread_cond_broadcast(&d->cv);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

/* start_thread: under d->mu; the wake pipe and the progress thread. */
static int start_thread(struct dist *d)
{
	if (pipe2(d->wake_fds, O_NONBLOCK | O_CLOEXEC) != 0) {
		log_error("dist: rank %d: cannot make a pipe: %s", d->rank,
			  strerror(errno));
		return DL_ESYS;
	}
	if (pthread_create(&d->thread, NULL, progress_main, d) != 0) {
		log_error("dist: rank %d: cannot start the progress thread: "
			  "%s",
			  d->rank, strerror(errno));
		return DL_ESYS;
	}
	d->thread_started = 1;
	return 0;
}

static int enqueue(struct dist *d, struct dist_req *req)
{
	int rc = 0;
	pthread_mutex_lock(&d->mu);
	if (!d->thread_started)
		rc = start_thread(d);
	if (rc == 0) {
		if (d->queue_tail)
			d->queue_tail->next_queued = req;
		else
			d->queue_head = req;
		d->queue_tail = req;
		pthread_cond_broadcast(&d->cv);
		if (d->in_batch) /* the thread sleeps in poll, not on cv */
			(void)!write(d->wake_fds[1], "", 1);
	}
	pthread_mutex_unlock(&d->mu);
	return rc;
}

/* ---- the table ---- */

static int tcp_prepare(struct dist *d, char *err, size_t err_size)
{
	d->scratch = malloc(DIST_SCRATCH_BYTES);
	if (d->scratch == NULL) {
		set_err(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	return 0;
}

static int tcp_init(struct dist *d, char *err, size_t err_size)
{
	(void)d;
	(void)err;
	(void)err_size;
	return 0; /* the mesh is all it needs */
}

/* tcp_release: stops the progress thread; requests still queued end
 * with DL_ECLOSED. */
static void tcp_release(struct dist *d)
{
	if (d->thread_started) {
		pthread_mutex_lock(&d->mu);
		d->stopping = 1;
		pthread_cond_broadcast(&d->cv);
		if (d->in_batch) /* wake it from poll */
			(void)!write(d->wake_fds[1], "", 1);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->thread, NULL);
		d->thread_started = 0;
	}
	if (d->wake_fds[0] >= 0) {
		close(d->wake_fds[0]);
		close(d->wake_fds[1]);
		d->wake_fds[0] = d->wake_fds[1] = -1;
	}
	free(d->batch);
	d->batch = NULL;
	free(d->scratch);
	d->scratch = NULL;
}

static void tcp_set_stream(struct dist *d, void *stream)
{
	(void)d; /* host buffers: there is no stream to order after */
	(void)stream;
}

static int tcp_send(struct dist *d, const void *buf, size_t count,
		    enum dist_dtype dtype, int peer)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_send(d, buf, count * dist_dtype_size(dtype),
				   dtype, peer);
	return rc;
}

static int tcp_recv(struct dist *d, void *buf, size_t count,
		    enum dist_dtype dtype, int peer)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_recv(d, buf, count * dist_dtype_size(dtype),
				   dtype, peer);
	return rc;
}

/* tcp_submit: nothing to move (count 0, world of one) completes at once */
static int tcp_submit(struct dist *d, struct dist_req *req)
{
	if (req->count == 0 || d->world == 1) {
		req->done = 1;
		return 0;
	}
	return enqueue(d, req);
}

static int tcp_wait(struct dist_req *req)
{
	struct dist *d = req->d;
	int status;
	pthread_mutex_lock(&d->mu);
	while (!req->done)
		pthread_cond_wait(&d->cv, &d->mu);
	status = req->status;
	pthread_mutex_unlock(&d->mu);
	return status;
}

static int tcp_broadcast(struct dist *d, void *buf, size_t count,
			 enum dist_dtype dtype, int root)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_broadcast(d, buf, count * dist_dtype_size(dtype),
					root);
	return rc;
}

static int tcp_reduce(struct dist *d, const void *send, void *recv,
		      size_t count, enum dist_dtype dtype, enum dist_op op,
		      int root)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_reduce(d, send, recv, count, dtype, op, root);
	return rc;
}

static int tcp_all_reduce(struct dist *d, const void *send, void *recv,
			  size_t count, enum dist_dtype dtype, enum dist_op op)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_all_reduce(d, send, recv, count, dtype, op);
	return rc;
}

static int tcp_all_gather(struct dist *d, const void *send, void *recv,
			  size_t count, enum dist_dtype dtype)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_all_gather(d, send, recv,
					 count * dist_dtype_size(dtype));
	return rc;
}

static int tcp_barrier(struct dist *d)
{
	int rc = ready(d);
	if (rc == 0)
		rc = dist_tcp_barrier(d);
	return rc;
}

const struct dist_ops dist_tcp_ops = {
    .prepare = tcp_prepare,
    .init = tcp_init,
    .release = tcp_release,
    .set_stream = tcp_set_stream,
    .send = tcp_send,
    .recv = tcp_recv,
    .submit = tcp_submit,
    .wait = tcp_wait,
    .broadcast = tcp_broadcast,
    .reduce = tcp_reduce,
    .all_reduce = tcp_all_reduce,
    .all_gather = tcp_all_gather,
    .barrier = tcp_barrier,
};
