/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_priv.h - the insides of struct dist shared by the collective
 * library's files: the group itself (dist.c), the bootstrap (dist_net.c,
 * over the sockets of dist_sock.c), the TCP backend (its table and
 * progress thread in dist_tcp_backend.c, algorithms in dist_tcp.c, point
 * to point in dist_p2p.c, reduction kernels in dist_reduce.c) and the
 * NCCL backend (dist_nccl.c). The front calls a backend only through its
 * struct dist_ops.
 */
#ifndef DLAUNCH_DIST_PRIV_H
#define DLAUNCH_DIST_PRIV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "dist.h"
#include "dist_flight.h"

#include "dlaunch/error.h"

/* set_err fills a caller's message buffer (NULL allowed) */
#define set_err(err, err_size, ...)                                            \
	((void)dl_errorf((err), (err_size), 0, __VA_ARGS__))

#define DIST_MAX_WORLD	   1024	      /* full mesh: one socket per peer */
#define DIST_NCCL_ID_BYTES 128	      /* sizeof(ncclUniqueId) */
#define DIST_SCRATCH_BYTES (2u << 20) /* receive ring of the TCP ring */

enum dist_req_kind {
	DIST_REQ_SEND,
	DIST_REQ_RECV,
	DIST_REQ_ALL_REDUCE,
};

/* A point-to-point transfer in progress: a 16-byte header (magic, dtype,
 * byte count) that the receiver checks, then the payload. */
#define DIST_P2P_HEADER_BYTES 16
struct dist_p2p {
	int sending;
	int peer;
	unsigned char *buf; /* never written when sending */
	size_t bytes;
	enum dist_dtype dtype;
	unsigned char hdr[DIST_P2P_HEADER_BYTES];
	size_t hdr_done, done;
};

struct dist_req {
	struct dist *d;
	enum dist_req_kind kind;
	void *buf;
	size_t count;
	enum dist_dtype dtype;
	enum dist_op op;
	int peer;
	int status;
	int done;
	/* TCP: the progress queue; NCCL: the isend/irecv not yet issued */
	struct dist_req *next_queued;
	struct dist_req *prev_all, *next_all; /* every unwaited request */
	void *cuda_event;    /* NCCL: recorded after the operation */
	int nccl_queued;     /* NCCL: waits in the queue for its group */
	struct dist_p2p p2p; /* TCP send/recv: its progress */
	int p2p_started;
	uint64_t flight; /* iall_reduce: its flight-recorder handle, or 0 */
};

struct dist_nccl; /* dist_nccl.c */

enum dist_hang {
	DIST_HANG_NONE = 0,
	DIST_HANG_SLEEP, /* sleep an hour */
	DIST_HANG_LOOP,	 /* spin for ever */
	DIST_HANG_READ,	 /* read a pipe nobody writes */
};

struct dist {
	struct dist_config cfg;
	int rank;
	int world;
	enum dist_backend backend;
	const struct dist_ops *ops; /* the backend's table */
	uint64_t timeout_ms;

	/* TCP: fds[peer] is the connection to peer (-1 for self). */
	int *fds;
	unsigned char *scratch; /* DIST_SCRATCH_BYTES, one user at a time */
	int failed;	    /* sticky: the first error that broke the group */
	atomic_int aborted; /* dist_abort was called (any thread) */
	/* the fault-injection hook of the ring all-reduce (dist_tcp.c):
	 * DLAUNCH_DIST_FAULT, read once in dist_init */
	int fault_call, fault_step, fault_kill;
	int ring_calls; /* ring all-reduces run so far */
	/* DLAUNCH_DIST_FAULT=CALL:sleep|loop|read: hang before the CALL-th
	 * all-reduce (dist_fault.c) */
	enum dist_hang hang_kind;
	int hang_call;
	int all_reduce_calls; /* all-reduces issued so far (with a hang) */
	struct dist_flight *flight; /* cfg.flight: the recorder, or NULL */

	/* Asynchronous operations: a FIFO run by one progress thread. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int thread_started;
	int stopping;
	struct dist_req *queue_head, *queue_tail;
	int running;	 /* the progress thread is executing a request */
	int wake_fds[2]; /* pipe: new requests for a running p2p batch */
	int in_batch;	 /* the progress thread waits on wake_fds[0] */
	struct dist_req **batch; /* dist_p2p_run_batch's snapshot */
	size_t batch_cap;
	struct dist_req *all; /* list of requests not yet waited for */

	unsigned char nccl_id[DIST_NCCL_ID_BYTES];
	struct dist_nccl *nccl;
};

/* dist_fault.c: the test hooks of DLAUNCH_DIST_FAULT (dist.h).
 * dist_fault_config reads them for a new group (the first group of the
 * process only; malformed values are logged and ignored);
 * dist_fault_before_all_reduce runs before each all-reduce is recorded
 * and issued, and never returns at the one a hang is set for (the sleep
 * kind returns after an hour). */
void dist_fault_config(struct dist *d);
void dist_fault_before_all_reduce(struct dist *d);

/* dist_net.c: forms the TCP mesh (fills d->fds) through the bootstrap that
 * rank 0 hosts on listen_fd (rank 0 only; -1: listen on MASTER_PORT). On
 * rank 0, d->nccl_id is sent to the others; elsewhere it is received. */
int dist_net_connect(struct dist *d, int listen_fd, char *err, size_t err_size);
void dist_net_close(struct dist *d);

/* dist_p2p.c: point-to-point transfers. dist_tcp_send/recv block (on the
 * caller's thread); dist_p2p_run_batch is called by the progress thread,
 * with d->mu held, when the head of the queue is a send or receive: it
 * runs that request and every send/receive queued behind it (also those
 * queued meanwhile) concurrently, each peer's sends and each peer's
 * receives in issue order, and completes them; it returns, with d->mu
 * held, when the head of the queue is something else or nothing. */
int dist_tcp_send(struct dist *d, const void *buf, size_t bytes,
		  enum dist_dtype dtype, int peer);
int dist_tcp_recv(struct dist *d, void *buf, size_t bytes,
		  enum dist_dtype dtype, int peer);
void dist_p2p_run_batch(struct dist *d);
/* dist_io_fail: records the group's first failure (sticky) and logs it
 * with the peer and operation; returns rc. */
int dist_io_fail(struct dist *d, int rc, int peer, const char *what);

/* dist_tcp.c: the host-buffer algorithms. Arguments are validated by the
 * caller; each returns 0 or a DL_E* code and marks the group failed on
 * an I/O error. */
int dist_tcp_broadcast(struct dist *d, void *buf, size_t bytes, int root);
int dist_tcp_all_reduce(struct dist *d, const void *send, void *recv,
			size_t count, enum dist_dtype dtype, enum dist_op op);
int dist_tcp_reduce(struct dist *d, const void *send, void *recv, size_t count,
		    enum dist_dtype dtype, enum dist_op op, int root);
int dist_tcp_all_gather(struct dist *d, const void *send, void *recv,
			size_t bytes);
int dist_tcp_barrier(struct dist *d);

/* dist_reduce.c: element-wise kernels on n elements.
 * dist_reduce_into: acc[i] = acc[i] op in[i] (in_first: in[i] op acc[i]).
 * dist_reduce_to: out[i] = a[i] op b[i]; out must not overlap a or b.
 * dist_reduce_scale: x[i] /= divisor (the AVG step; integer division for
 * integer types). SUM stands for AVG in the first two. */
void dist_reduce_into(enum dist_dtype dtype, enum dist_op op, void *acc,
		      const void *in, size_t n, int in_first);
void dist_reduce_to(enum dist_dtype dtype, enum dist_op op, void *out,
		    const void *a, const void *b, size_t n);
void dist_reduce_scale(enum dist_dtype dtype, void *x, size_t n, int divisor);

/* struct dist_ops: what a backend does for the front (dist.c), which has
 * validated the arguments and picked the table once, in dist_init. Every
 * operation returns 0 or a DL_E* code; on failure prepare and init leave a
 * message in err, and the front then calls release (which must cope with
 * a group that is only partly set up).
 *   prepare     before the bootstrap: what must travel in it, scratch
 *   init        after the mesh is formed (world 1: no mesh)
 *   release     before the requests not waited for are freed (d->all
 *               still lists them) and before the sockets close
 *   set_stream  dist_set_stream (a cudaStream_t, or NULL)
 *   submit      starts an isend, irecv or iall_reduce (req->kind) that
 *               dist_wait completes; on failure the front frees req
 *   wait        blocks until req is done and returns its status (the
 *               front unlinks and frees it)
 * The rest mirror the public operations of dist.h. */
struct dist_ops {
	int (*prepare)(struct dist *d, char *err, size_t err_size);
	int (*init)(struct dist *d, char *err, size_t err_size);
	void (*release)(struct dist *d);
	void (*set_stream)(struct dist *d, void *stream);
	int (*send)(struct dist *d, const void *buf, size_t count,
		    enum dist_dtype dtype, int peer);
	int (*recv)(struct dist *d, void *buf, size_t count,
		    enum dist_dtype dtype, int peer);
	int (*submit)(struct dist *d, struct dist_req *req);
	int (*wait)(struct dist_req *req);
	int (*broadcast)(struct dist *d, void *buf, size_t count,
			 enum dist_dtype dtype, int root);
	int (*reduce)(struct dist *d, const void *send, void *recv,
		      size_t count, enum dist_dtype dtype, enum dist_op op,
		      int root);
	int (*all_reduce)(struct dist *d, const void *send, void *recv,
			  size_t count, enum dist_dtype dtype, enum dist_op op);
	int (*all_gather)(struct dist *d, const void *send, void *recv,
			  size_t count, enum dist_dtype dtype);
	int (*barrier)(struct dist *d);
};

/* dist_tcp_backend.c: the TCP backend, always built. */
extern const struct dist_ops dist_tcp_ops;

/* dist_nccl_ops: the NCCL backend's table in *out (dist_nccl.c, CUDA
 * builds), or DL_ENOTSUP and a message saying why there is none
 * (dist_nccl_nocuda.c, builds without CUDA). */
int dist_nccl_ops(const struct dist_ops **out, char *err, size_t err_size);

#endif
