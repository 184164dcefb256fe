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
 * that wait. Nothing here
 * runs unless the NCCL backend was asked for, so a CUDA build still runs
 * the TCP backend on a machine without a GPU.
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

/* settle: waits until the communicator has no operation in progress,
 * bounded by the timeout; aborts the communicator past it. */
static int settle(struct dist *d, ncclResult_t res, const char *what)
{
	struct dist_nccl *n = d->nccl;
	uint64_t deadline = clock_now_ms() + d->timeout_ms;
	while (res == ncclInProgress) {
		if (clock_now_ms() >= deadline) {
			ncclCommAbort(n->comm);
			n->comm = NULL;
			return nccl_fail(d, DL_ETIMEDOUT, what,
					 "timed out; communicator aborted");
		}
		pause_briefly();
		if (ncclCommGetAsyncError(n->comm, &res) != ncclSuccess)
			break;
	}
	if (res != ncclSuccess)
		return nccl_fail(d, DL_EIO, what, ncclGetErrorString(res));
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
		if (n->comm &&
		    ncclCommGetAsyncError(n->comm, &async) == ncclSuccess &&
		    async != ncclSuccess && async != ncclInProgress) {
			ncclCommAbort(n->comm);
			n->comm = NULL;
			return nccl_fail(d, DL_ECLOSED, what,
					 ncclGetErrorString(async));
		}
		if (clock_now_ms() >= deadline) {
			if (n->comm)
				ncclCommAbort(n->comm);
			n->comm = NULL;
			return nccl_fail(d, DL_ETIMEDOUT, what,
					 "timed out waiting for the operation; "
					 "communicator aborted");
		}
		pause_briefly();
	}
}

/* nccl_ready: 0 when an operation may be enqueued, after ordering our
 * stream behind the work queued so far on the caller's. */
static int nccl_ready(struct dist *d, const char *what)
{
	struct dist_nccl *n = d->nccl;
	cudaError_t ce = cudaSuccess;
	if (d->failed)
		return d->failed;
	if (n == NULL || n->comm == NULL)
		return DL_ECLOSED;
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

static ncclRedOp_t nccl_op(enum dist_op op)
{
	switch (op) {
	case DIST_SUM: return ncclSum;
	case DIST_AVG: return ncclAvg;
	case DIST_MAX: return ncclMax;
	case DIST_MIN: return ncclMin;
	}
	return ncclSum;
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

int dist_nccl_new_id(struct dist *d, char *err, size_t err_size)
{
	ncclUniqueId id;
	cudaError_t ce = cudaSetDevice(d->cfg.cuda_device);
	if (ce != cudaSuccess) {
		snprintf(err, err_size,
			 "rank %d: cannot use CUDA device %d: %s (is there a "
			 "GPU? use the tcp backend otherwise)",
			 d->rank, d->cfg.cuda_device, cudaGetErrorString(ce));
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

int dist_nccl_init(struct dist *d, char *err, size_t err_size)
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
		snprintf(err, err_size,
			 "rank %d: cannot use CUDA device %d: %s (is there a "
			 "GPU? use the tcp backend otherwise)",
			 d->rank, d->cfg.cuda_device, cudaGetErrorString(ce));
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

void dist_nccl_free(struct dist *d)
{
	struct dist_nccl *n = d->nccl;
	if (n == NULL)
		return;
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
	if (n->barrier_buf)
		cudaFree(n->barrier_buf);
	if (n->after_event)
		cudaEventDestroy(n->after_event);
	if (n->stream)
		cudaStreamDestroy(n->stream);
	free(n);
	d->nccl = NULL;
}

void dist_nccl_set_stream(struct dist *d, void *stream)
{
	if (d->nccl)
		d->nccl->after = (cudaStream_t)stream;
}

int dist_nccl_send(struct dist *d, const void *buf, size_t count,
		   enum dist_dtype dtype, int peer, struct dist_req *req)
{
	int rc = nccl_ready(d, "send");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclSend(buf, count, nccl_type(dtype), peer,
				    d->nccl->comm, d->nccl->stream);
	return finish(d, res, "send", req);
}

int dist_nccl_recv(struct dist *d, void *buf, size_t count,
		   enum dist_dtype dtype, int peer, struct dist_req *req)
{
	int rc = nccl_ready(d, "recv");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclRecv(buf, count, nccl_type(dtype), peer,
				    d->nccl->comm, d->nccl->stream);
	return finish(d, res, "recv", req);
}

int dist_nccl_broadcast(struct dist *d, void *buf, size_t count,
			enum dist_dtype dtype, int root)
{
	int rc = nccl_ready(d, "broadcast");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclBroadcast(buf, buf, count, nccl_type(dtype),
					 root, d->nccl->comm, d->nccl->stream);
	return finish(d, res, "broadcast", NULL);
}

int dist_nccl_reduce(struct dist *d, const void *send, void *recv, size_t count,
		     enum dist_dtype dtype, enum dist_op op, int root)
{
	int rc = nccl_ready(d, "reduce");
	if (rc != 0)
		return rc;
	ncclResult_t res =
	    ncclReduce(send, recv, count, nccl_type(dtype), nccl_op(op), root,
		       d->nccl->comm, d->nccl->stream);
	return finish(d, res, "reduce", NULL);
}

int dist_nccl_all_reduce(struct dist *d, const void *send, void *recv,
			 size_t count, enum dist_dtype dtype, enum dist_op op,
			 struct dist_req *req)
{
	int rc = nccl_ready(d, "all_reduce");
	if (rc != 0)
		return rc;
	ncclResult_t res =
	    ncclAllReduce(send, recv, count, nccl_type(dtype), nccl_op(op),
			  d->nccl->comm, d->nccl->stream);
	return finish(d, res, "all_reduce", req);
}

int dist_nccl_all_gather(struct dist *d, const void *send, void *recv,
			 size_t count, enum dist_dtype dtype)
{
	int rc = nccl_ready(d, "all_gather");
	if (rc != 0)
		return rc;
	ncclResult_t res = ncclAllGather(send, recv, count, nccl_type(dtype),
					 d->nccl->comm, d->nccl->stream);
	return finish(d, res, "all_gather", NULL);
}

int dist_nccl_barrier(struct dist *d)
{
	int rc = nccl_ready(d, "barrier");
	if (rc != 0)
		return rc;
	ncclResult_t res =
	    ncclAllReduce(d->nccl->barrier_buf, d->nccl->barrier_buf, 1,
			  ncclInt32, ncclSum, d->nccl->comm, d->nccl->stream);
	return finish(d, res, "barrier", NULL);
}

int dist_nccl_wait(struct dist_req *req)
{
	struct dist *d = req->d;
	int rc = 0;
	if (req->cuda_event) {
		rc = d->nccl && d->nccl->comm
			 ? wait_done(d, req->cuda_event, "wait")
		     : d->failed ? d->failed
				 : DL_ECLOSED;
		cudaEventDestroy(req->cuda_event);
		req->cuda_event = NULL;
	}
	return rc;
}
