/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_nccl.c - the NCCL backend of the collective library (CUDA builds
 * only; NCCL's API is plain C, so this is compiled by the C compiler).
 *
 * Rank 0 makes the unique id before the bootstrap, which carries it to the
 * others; each rank then selects cfg->cuda_device and creates a
 * non-blocking communicator, so that every wait can be bounded: calls
 * that answer ncclInProgress are settled by polling ncclCommGetAsyncError
 * against the group's timeout, and a communicator that does not settle in
 * time is aborted (ncclCommAbort), which fails the group.
 *
 * Operations run on the library's own stream. After dist_set_stream they
 * are first ordered after the work already queued on the caller's stream
 * (an event recorded there, waited on by ours), and kernels the caller
 * queues later do not wait for them: a gradient all-reduce issued from the
 * backward pass overlaps the backward kernels that follow it, as DDP's
 * separate communication stream does. Blocking operations wait for our
 * stream (bounded the same way); asynchronous ones record an event that
 * dist_wait polls, and the caller may touch the buffers again only after
 * that wait.
 *
 * isend and irecv are not issued one by one: NCCL runs separately issued
 * sends and receives one after another on the GPU, so two ranks that
 * each isend then irecv to the other would both wait forever in their
 * send. They are queued instead, and the whole queue is issued as one
 * NCCL group (ncclGroupStart/End), in which calls progress together, at
 * the first point that needs them: a dist_wait on any of them, any other
 * operation, or dist_free. Nothing here runs unless the NCCL backend was
 * asked for, so a CUDA build still runs the TCP backend on a machine
 * without a GPU. The front (dist.c) reaches this file only through its
 * table, nccl_ops, at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <nccl.h>

#include "dist_priv.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

_Static_assert(sizeof(ncclUniqueId) == DIST_NCCL_ID_BYTES,
	       "ncclUniqueId size changed");

struct dist_nccl {
	ncclComm_t comm;
	cudaStream_t stream;	 /* ours: every operation runs on it */
	cudaStream_t after;	 /* the caller's stream, or NULL */
	cudaEvent_t after_event; /* recorded on `after` before each op */
	int *barrier_buf;	 /* one int on the device */
	/* isend/irecv not yet issued, in posting order (next_queued) */
	struct dist_req *p2p_head, *p2p_tail;
};

static void pause_briefly(void)
{
	struct timespec ts = {0, 50000}; /* 50 us */
	nanosleep(&ts, NULL);
}

static int nccl_fail(struct dist *d, int rc, const char *what,
		     const char *detail)
{
	if (!d->failed) {
		d->failed = rc;
		log_error("dist: rank %d: nccl %s: %s", d->rank, what, detail);
	}
	return rc;
}

/* fail_abort: fails the group, aborting the communicator: NCCL kernels
 * in flight (waiting for a dead or stalled peer) stop, and nothing more
 * runs on it; the message says so. */
static int fail_abort(struct dist *d, int rc, const char *what,
		      const char *detail)
{
	struct dist_nccl *n = d->nccl;
	char msg[256];
	if (n->comm) {
		ncclCommAbort(n->comm);
		n->comm = NULL;
	}
	snprintf(msg, sizeof(msg), "%s; communicator aborted", detail);
	return nccl_fail(d, rc, what, msg);
}

/* timeout_detail: "timed out after N ms" + what was awaited */
static const char *timeout_detail(const struct dist *d, const char *awaited,
				  char *buf, size_t size)
{
	snprintf(buf, size, "timed out after %llu ms %s",
		 (unsigned long long)d->timeout_ms, awaited);
	return buf;
}

/* settle: waits until the communicator has no operation in progress,
 * bounded by the timeout; aborts the communicator past it or when it
 * reports an error. */
static int settle(struct dist *d, ncclResult_t res, const char *what)
{
	struct dist_nccl *n = d->nccl;
	uint64_t deadline = clock_now_ms() + d->timeout_ms;
	char buf[128];
	while (res == ncclInProgress) {
		if (atomic_load(&d->aborted))
			return fail_abort(d, DL_ECLOSED, what,
					  "the group was aborted");
		if (clock_now_ms() >= deadline)
			return fail_abort(d, DL_ETIMEDOUT, what,
					  timeout_detail(d, "settling the call",
							 buf, sizeof(buf)));
		pause_briefly();
		if (ncclCommGetAsyncError(n->comm, &res) != ncclSuccess)
			break;
	}
	if (res != ncclSuccess)
		return fail_abort(d, DL_EIO, what, ncclGetErrorString(res));
	return 0;
}

/* wait_event: polls ev (or the stream when ev is NULL) and the
 * communicator's asynchronous error until done or the timeout. */
static int wait_done(struct dist *d, cudaEvent_t ev, const char *what)
{
	struct dist_nccl *n = d->nccl;
	uint64_t deadline = clock_now_ms() + d->timeout_ms;
	for (;;) {
		cudaError_t ce =
		    ev ? cudaEventQuery(ev) : cudaStreamQuery(n->stream);
		if (ce == cudaSuccess)
			return 0;
		if (ce != cudaErrorNotReady)
			return nccl_fail(d, DL_EIO, what,
					 cudaGetErrorString(ce));
		ncclResult_t async = ncclSuccess;
		/* dist_abort (another thread) only raises the flag: the
		 * communicator is aborted here, by the thread using it */
		if (atomic_load(&d->aborted))
			return fail_abort(d, DL_ECLOSED, what,
					  "the group was aborted");
		if (n->comm &&
		    ncclCommGetAsyncError(n->comm, &async) == ncclSuccess &&
		    async != ncclSuccess && async != ncclInProgress)
			return fail_abort(d, DL_ECLOSED, what,
					  ncclGetErrorString(async));
		if (clock_now_ms() >= deadline) {
			char buf[128];
			return fail_abort(d, DL_ETIMEDOUT, what,
					  timeout_detail(d,
							 "waiting for the "
							 "operation (a peer "
							 "dead or stalled?)",
							 buf, sizeof(buf)));
		}
		pause_briefly();
	}
}

/* usable: 0 when the communicator may take work; otherwise the group's
 * failure (or DL_ECLOSED once the communicator is gone). */
static int usable(struct dist *d)
{
	if (atomic_load(&d->aborted) && d->nccl && d->nccl->comm)
		return fail_abort(d, DL_ECLOSED, "operation",
				  "the group was aborted");
	if (d->failed)
		return d->failed;
	if (d->nccl == NULL || d->nccl->comm == NULL)
		return DL_ECLOSED;
	return 0;
}

/* order_after_caller: makes our stream wait for the work queued so far
 * on the caller's stream (dist_set_stream), if there is one. */
static int order_after_caller(struct dist *d, const char *what)
{
	struct dist_nccl *n = d->nccl;
	cudaError_t ce = cudaSuccess;
	if (n->after) {
		ce = cudaEventRecord(n->after_event, n->after);
		if (ce == cudaSuccess)
			ce = cudaStreamWaitEvent(n->stream, n->after_event, 0);
	}
	if (ce != cudaSuccess)
		return nccl_fail(d, DL_EIO, what, cudaGetErrorString(ce));
	return 0;
}

static ncclDataType_t nccl_type(enum dist_dtype dtype)
{
	switch (dtype) {
	case DIST_FLOAT32: return ncclFloat32;
	case DIST_FLOAT64: return ncclFloat64;
	case DIST_INT32: return ncclInt32;
	case DIST_INT64: return ncclInt64;
	case DIST_UINT8: return ncclUint8;
	}
	return ncclUint8;
}

/* nccl_op: NCCL's operation for op in a group of world ranks. The
 * average of one rank is a sum: NCCL 2.28.3 (seen on an H200) leaves the
 * last elements of an out-of-place ncclAvg on one rank unwritten (70001
 * floats: the last 17; 1310723: the last 3), while ncclSum copies them */
static ncclRedOp_t nccl_op(enum dist_op op, int world)
{
	if (op == DIST_AVG && world == 1)
		return ncclSum;
	switch (op) {
	case DIST_SUM: return ncclSum;
	case DIST_AVG: return ncclAvg;
	case DIST_MAX: return ncclMax;
	case DIST_MIN: return ncclMin;
	}
	return ncclSum;
}

/* record_done: records on our stream the event that tells dist_wait
 * that req's operation, enqueued just before, has finished. */
static int record_done(struct dist *d, struct dist_req *req, const char *what)
{
	cudaEvent_t ev;
	cudaError_t ce = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
	if (ce == cudaSuccess) {
		ce = cudaEventRecord(ev, d->nccl->stream);
		if (ce != cudaSuccess)
			cudaEventDestroy(ev);
	}
	if (ce != cudaSuccess)
		return nccl_fail(d, DL_EIO, what, cudaGetErrorString(ce));
	req->cuda_event = ev;
	return 0;
}

/* p2p: enqueues one send (send != 0) or receive on our stream */
static ncclResult_t p2p(struct dist_nccl *n, int send, const void *buf,
			size_t count, enum dist_dtype dtype, int peer)
{
	return send ? ncclSend(buf, count, nccl_type(dtype), peer, n->comm,
			       n->stream)
		    : ncclRecv((void *)buf, count, nccl_type(dtype), peer,
			       n->comm, n->stream);
}

/* flush_p2p: issues every queued isend/irecv in one NCCL group, where
 * they progress together whatever order each peer posted its own in
 * (calls to the same peer still run in posting order), and records each
 * one's completion event. On our non-blocking communicator ncclGroupEnd
 * may answer ncclInProgress while NCCL is still putting the group on the
 * stream: settle waits for that (bounded, aborting past the timeout)
 * before the events are recorded behind it. Every request leaves the
 * queue; one that could not be issued keeps the error in its status. */
static int flush_p2p(struct dist *d)
{
	struct dist_nccl *n = d->nccl;
	struct dist_req *head, *req, *next;
	ncclResult_t res, call = ncclSuccess;
	int rc;
	if (n == NULL || n->p2p_head == NULL)
		return 0;
	head = n->p2p_head;
	n->p2p_head = n->p2p_tail = NULL;
	rc = usable(d);
	if (rc == 0) {
		res = ncclGroupStart();
		if (res == ncclSuccess) {
			for (req = head; req != NULL; req = req->next_queued) {
				ncclResult_t one =
				    p2p(n, req->kind == DIST_REQ_SEND, req->buf,
					req->count, req->dtype, req->peer);
				if (one != ncclSuccess &&
				    one != ncclInProgress &&
				    call == ncclSuccess)
					call = one;
			}
			/* closes the group even when a call failed */
			res = ncclGroupEnd();
		}
		rc = settle(d, res, "isend/irecv");
		if (rc == 0 && call != ncclSuccess)
			rc = nccl_fail(d, DL_EIO, "isend/irecv",
				       ncclGetErrorString(call));
	}
	for (req = head; req != NULL; req = next) {
		next = req->next_queued;
		req->next_queued = NULL;
		req->nccl_queued = 0;
		if (rc == 0)
			rc = record_done(d, req, "isend/irecv");
		if (rc != 0)
			req->status = rc;
	}
	return rc;
}

/* nccl_ready: 0 when an operation may be enqueued, after the queued
 * isend/irecv (they come first on our stream) and with our stream
 * ordered behind the work queued so far on the caller's. */
static int nccl_ready(struct dist *d, const char *what)
{
	int rc = flush_p2p(d);
	if (rc == 0)
		rc = usable(d);
	if (rc == 0)
		rc = order_after_caller(d, what);
	return rc;
}

/* queue_p2p: puts an isend or irecv in the queue that flush_p2p issues.
 * Its place behind the caller's stream is taken now, when it is posted:
 * the wait on the caller's work goes on our stream ahead of the group. */
static int queue_p2p(struct dist *d, struct dist_req *req, const char *what)
{
	struct dist_nccl *n = d->nccl;
	int rc = usable(d);
	if (rc == 0)
		rc = order_after_caller(d, what);
	if (rc != 0)
		return rc;
	req->nccl_queued = 1;
	req->next_queued = NULL;
	if (n->p2p_tail)
		n->p2p_tail->next_queued = req;
	else
		n->p2p_head = req;
	n->p2p_tail = req;
	return 0;
}

/* finish: after an operation was enqueued: settle it, then either
 * record req's event (asynchronous) or wait for the stream. */
static int finish(struct dist *d, ncclResult_t res, const char *what,
		  struct dist_req *req)
{
	int rc = settle(d, res, what);
	if (rc != 0)
		return rc;
	if (req == NULL)
		return wait_done(d, NULL, what);
	return record_done(d, req, what);
}

/* device_error: why this rank cannot use its CUDA device, with what it
 * sees; the nccl backend moves device buffers, so there is no other
 * backend to suggest here (the caller knows whether one is allowed). */
static void device_error(const struct dist *d, cudaError_t ce, char *err,
			 size_t err_size)
{
	const char *visible = getenv("CUDA_VISIBLE_DEVICES");

	snprintf(err, err_size,
		 "rank %d: cannot use CUDA device %d: %s (the nccl backend "
		 "needs a GPU for each rank of the node; "
		 "CUDA_VISIBLE_DEVICES=%s)",
		 d->rank, d->cfg.cuda_device, cudaGetErrorString(ce),
		 visible ? visible : "(unset)");
}

/* nccl_prepare: rank 0 makes the unique id the bootstrap carries */
static int nccl_prepare(struct dist *d, char *err, size_t err_size)
{
	ncclUniqueId id;
	if (d->rank != 0)
		return 0;
	cudaError_t ce = cudaSetDevice(d->cfg.cuda_device);
	if (ce != cudaSuccess) {
		device_error(d, ce, err, err_size);
		return DL_ENOTSUP;
	}
	ncclResult_t res = ncclGetUniqueId(&id);
	if (res != ncclSuccess) {
		snprintf(err, err_size, "rank 0: ncclGetUniqueId: %s",
			 ncclGetErrorString(res));
		return DL_EIO;
	}
	memcpy(d->nccl_id, &id, sizeof(id));
	return 0;
}

/* nccl_init: the device, our stream and the communicator */
static int nccl_init(struct dist *d, char *err, size_t err_size)
{
	struct dist_nccl *n = calloc(1, sizeof(*n));
	ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
	ncclUniqueId id;
	cudaError_t ce;
	ncclResult_t res;
	if (n == NULL) {
		snprintf(err, err_size, "out of memory");
		return DL_ENOMEM;
	}
	d->nccl = n;
	ce = cudaSetDevice(d->cfg.cuda_device);
	if (ce == cudaSuccess)
		ce = cudaStreamCreateWithFlags(&n->stream,
					       cudaStreamNonBlocking);
	if (ce == cudaSuccess)
		ce = cudaEventCreateWithFlags(&n->after_event,
					      cudaEventDisableTiming);
	if (ce == cudaSuccess)
		ce = cudaMalloc((void **)&n->barrier_buf, sizeof(int));
	if (ce == cudaSuccess)
		ce = cudaMemset(n->barrier_buf, 0, sizeof(int));
	if (ce != cudaSuccess) {
		device_error(d, ce, err, err_size);
		return DL_ENOTSUP;
	}
	memcpy(&id, d->nccl_id, sizeof(id));
	config.blocking = 0;
	res = ncclCommInitRankConfig(&n->comm, d->world, id, d->rank, &config);
	if (res != ncclSuccess && res != ncclInProgress) {
		snprintf(err, err_size, "rank %d: ncclCommInitRank: %s",
			 d->rank, ncclGetErrorString(res));
		n->comm = NULL;
		return DL_EIO;
	}
	int rc = settle(d, res, "init");
	if (rc != 0) {
		snprintf(err, err_size,
			 "rank %d: creating the NCCL communicator: %s", d->rank,
			 dl_strerror(rc));
		return rc;
	}
	return 0;
}

/* nccl_release: issues what is still queued, closes the communicator
 * and releases the events of the requests not waited for (not them). */
static void nccl_release(struct dist *d)
{
	struct dist_nccl *n = d->nccl;
	if (n == NULL)
		return;
	/* isend/irecv never waited for still go out, so that peers waiting
	 * on them finish; finalizing waits for them (bounded) */
	(void)flush_p2p(d);
	if (n->comm) {
		if (d->failed) {
			ncclCommAbort(n->comm);
		} else {
			ncclResult_t res = ncclCommFinalize(n->comm);
			if (settle(d, res, "finalize") == 0 && n->comm)
				ncclCommDestroy(n->comm);
			else if (n->comm)
				ncclCommAbort(n->comm);
		}
	}
	for (struct dist_req *req = d->all; req != NULL; req = req->next_all) {
		if (req->cuda_event)
			cudaEventDestroy(req->cuda_event);
		req->cuda_event = NULL;
	}
	if (n->barrier_buf)
		cudaFree(n->barrier_buf);
	if (n->after_event)
		cudaEventDestroy(n->after_event);
	if (n->stream)
		cudaStreamDestroy(n->stream);
	free(n);
	d->nccl = NULL;
}

static void nccl_set_stream(struct dist *d, void *stream)
{
	if (d->nccl)
		d->nccl->after = (cudaStream_t)stream;
}

/* point_to_point: an isend/irecv (req) joins the queue flush_p2p issues;
 * a blocking send/recv goes out at once and is waited for */
static int point_to_point(struct dist *d, int send, const void *buf,
			  size_t count, enum dist_dtype dtype, int peer,
			  struct dist_req *req)
{
	const char *what = send ? "send" : "recv";
	if (req != NULL)
		return queue_p2p(d, req, send ? "isend" : "irecv");
	int rc = nccl_ready(d, what);
	if (rc != 0)
		return rc;
	return finish(d, p2p(d->nccl, send, buf, count, dtype, peer), what,
		      NULL);
}

static int nccl_send(struct dist *d, const void *buf, size_t count,
		     enum dist_dtype dtype, int peer)
{
	return point_to_point(d, 1, buf, count, dtype, peer, NULL);
}

static int nccl_recv(struct dist *d, void *buf, size_t count,
		     enum dist_dtype dtype, int peer)
{
	return point_to_point(d, 0, buf, count, dtype, peer, NULL);
}

static int nccl_broadcast(struct dist *d, void *buf, size_t count,
			  enum dist_dtype dtype, int root)
{
	int rc = nccl_ready(d, "broadcast");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclBroadcast(buf, buf, count, nccl_type(dtype),
					 root, d->nccl->comm, d->nccl->stream);
	return finish(d, res, "broadcast", NULL);
}

static int nccl_reduce(struct dist *d, const void *send, void *recv,
		       size_t count, enum dist_dtype dtype, enum dist_op op,
		       int root)
{
	int rc = nccl_ready(d, "reduce");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclReduce(send, recv, count, nccl_type(dtype),
				      nccl_op(op, d->world), root,
				      d->nccl->comm, d->nccl->stream);
	return finish(d, res, "reduce", NULL);
}

/* all_reduce: blocking (req NULL) or an iall_reduce (req) */
static int all_reduce(struct dist *d, const void *send, void *recv,
		      size_t count, enum dist_dtype dtype, enum dist_op op,
		      struct dist_req *req)
{
	int rc = nccl_ready(d, "all_reduce");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclAllReduce(send, recv, count, nccl_type(dtype),
					 nccl_op(op, d->world), d->nccl->comm,
					 d->nccl->stream);
	return finish(d, res, "all_reduce", req);
}

static int nccl_all_reduce(struct dist *d, const void *send, void *recv,
			   size_t count, enum dist_dtype dtype, enum dist_op op)
{
	return all_reduce(d, send, recv, count, dtype, op, NULL);
}

static int nccl_all_gather(struct dist *d, const void *send, void *recv,
			   size_t count, enum dist_dtype dtype)
{
	int rc = nccl_ready(d, "all_gather");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclAllGather(send, recv, count, nccl_type(dtype),
					 d->nccl->comm, d->nccl->stream);
	return finish(d, res, "all_gather", NULL);
}

static int nccl_barrier(struct dist *d)
{
	int rc = nccl_ready(d, "barrier");
	if (rc != 0)
		return rc;
	ncclResult_t res =
	    ncclAllReduce(d->nccl->barrier_buf, d->nccl->barrier_buf, 1,
			  ncclInt32, ncclSum, d->nccl->comm, d->nccl->stream);
	return finish(d, res, "barrier", NULL);
}

/* nccl_submit: an isend/irecv joins the queue flush_p2p issues; an
 * iall_reduce goes on our stream at once, with its event behind it. */
static int nccl_submit(struct dist *d, struct dist_req *req)
{
	switch (req->kind) {
	case DIST_REQ_SEND:
		return point_to_point(d, 1, req->buf, req->count, req->dtype,
				      req->peer, req);
	case DIST_REQ_RECV:
		return point_to_point(d, 0, req->buf, req->count, req->dtype,
				      req->peer, req);
	case DIST_REQ_ALL_REDUCE:
		return all_reduce(d, req->buf, req->buf, req->count, req->dtype,
				  req->op, req);
	}
	return DL_EINVAL;
}

static int nccl_wait(struct dist_req *req)
{
	struct dist *d = req->d;
	int rc = 0;
	if (req->nccl_queued)
		(void)flush_p2p(d); /* req gets its event or its error */
	if (req->cuda_event) {
		rc = d->nccl && d->nccl->comm
			 ? wait_done(d, req->cuda_event, "wait")
		     : d->failed ? d->failed
				 : DL_ECLOSED;
		cudaEventDestroy(req->cuda_event);
		req->cuda_event = NULL;
	} else {
		rc = req->status;
	}
	return rc;
}

static const struct dist_ops nccl_ops = {
    .prepare = nccl_prepare,
    .init = nccl_init,
    .release = nccl_release,
    .set_stream = nccl_set_stream,
    .send = nccl_send,
    .recv = nccl_recv,
    .submit = nccl_submit,
    .wait = nccl_wait,
    .broadcast = nccl_broadcast,
    .reduce = nccl_reduce,
    .all_reduce = nccl_all_reduce,
    .all_gather = nccl_all_gather,
    .barrier = nccl_barrier,
};

int dist_nccl_ops(const struct dist_ops **out, char *err, size_t err_size)
{
	(void)err;
	(void)err_size;
	*out = &nccl_ops;
	return 0;
}
