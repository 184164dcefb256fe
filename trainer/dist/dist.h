/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist.h - the collective library of dlaunch-train: one API, two backends.
 *
 * DIST_BACKEND_TCP moves host buffers over a TCP ring (pipelined, chunked);
 * DIST_BACKEND_NCCL moves CUDA device buffers with NCCL (only in builds with
 * CUDA; elsewhere dist_init returns DL_ENOTSUP). The process group is formed
 * from MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE: rank 0 listens on
 * MASTER_PORT and hosts the bootstrap through which the peers' addresses and
 * NCCL's unique id travel. Every operation is collective over all ranks
 * unless it names a peer, and every wait is bounded by the configured
 * timeout: a dead or missing peer gives DL_ETIMEDOUT or DL_ECLOSED, never a
 * hang. All functions return 0 or a negative DL_E* code (dlaunch/error.h).
 *
 * Threading: one thread issues operations at a time. Asynchronous operations
 * (isend, irecv, iall_reduce) run in issue order on the library's own
 * progress thread (TCP) or stream (NCCL) and complete through dist_wait.
 *
 * Details of this implementation (additions to the contract above):
 * - A blocking operation may be issued while asynchronous ones are in
 *   flight: on TCP it first waits for them to finish (they keep their
 *   order), then runs on the caller's thread. Consecutive isend/irecv
 *   progress concurrently, so the order in which two ranks post a matching
 *   isend/irecv pair does not matter.
 * - Reductions give every rank the same bits (one fixed operand order).
 *   DIST_AVG sums, then divides by the world size: integer division,
 *   truncating toward zero, for integer types. Integer sums wrap. uint8
 *   is accepted by every operation, reductions included. On NCCL, AVG of
 *   a floating type is NCCL's: each operand is multiplied by 1/world
 *   before the sum, which may differ from sum / world in the last bits.
 * - dist_reduce: ranks other than root may pass recv = NULL; a recv they
 *   do pass may be used as scratch (its content afterwards is unspecified).
 * - dist_all_gather: send may be recv + rank * count (in place).
 * - Errors: an operation that fails on TCP (peer gone: DL_ECLOSED; silent
 *   past timeout_ms: DL_ETIMEDOUT; a mismatched send/recv: DL_EPROTO)
 *   leaves the streams out of step, so the group is failed from then on:
 *   every later operation returns that error at once; free the group. The
 *   timeout bounds each wait for progress, not a whole operation.
 * - NCCL: blocking operations return once the stream has finished them.
 *   isend/irecv are queued and issued together, as one NCCL group, by
 *   the first dist_wait, other operation or dist_free after them; they
 *   do not start before that.
 * - DLAUNCH_DIST_TIMEOUT (a duration: "300", "30s", "500ms") sets
 *   timeout_ms in dist_config_from_env.
 * - dist_abort (any thread) cancels the operations in flight without
 *   waiting for peers: they and every later one fail with DL_ECLOSED
 *   (TCP: the mesh's sockets are shut down, which the peers see as this
 *   rank leaving). Free the group afterwards and form a new one.
 * - DLAUNCH_DIST_FAULT=CALL:STEP[:kill] (tests only): on the rank named by
 *   DLAUNCH_DIST_FAULT_RANK (default 0), the CALL-th ring all-reduce
 *   (1-based, counted per process) fails once it has sent its plan step
 *   STEP, even if all its bytes have arrived (one round: steps
 *   0..world-2 are the reduce-scatter, world-1..2*world-3 the
 *   all-gather), as dist_abort would, or with
 *   ":kill" the process kills itself there. It applies to the first
 *   group a process forms, and fires once.
 * - DLAUNCH_DIST_FAULT=CALL:KIND (tests only; the rank as above), KIND
 *   one of sleep, loop, read: that rank hangs before its CALL-th
 *   all-reduce (1-based, blocking and asynchronous ones counted alike,
 *   in the first group of the process), on the thread that issues it,
 *   before the flight recorder records it: "sleep" sleeps an hour (then
 *   goes on), "loop" spins for ever, "read" blocks for ever reading a
 *   pipe nobody writes. It logs "DLAUNCH_DIST_FAULT: hanging" first. A
 *   stop signal does not end the hang (dlaunch-train's handler only sets
 *   a flag, as in a real hang): SIGKILL does. The other ranks wait in
 *   that all-reduce until their timeout.
 * - Flight recorder (dist_flight.h): with cfg.flight set, each
 *   collective (not point-to-point) is recorded when issued and when it
 *   completes.
 * - Limits: world size at most 1024 (the TCP backend keeps one socket per
 *   peer).
 */
#ifndef DLAUNCH_DIST_H
#define DLAUNCH_DIST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct dist_flight;

enum dist_backend { DIST_BACKEND_TCP = 0, DIST_BACKEND_NCCL = 1 };
enum dist_dtype {
	DIST_FLOAT32 = 0,
	DIST_FLOAT64 = 1,
	DIST_INT32 = 2,
	DIST_INT64 = 3,
	DIST_UINT8 = 4,
};
enum dist_op { DIST_SUM = 0, DIST_AVG = 1, DIST_MAX = 2, DIST_MIN = 3 };

struct dist_config {
	char master_addr[256];
	uint16_t master_port;
	int rank;
	int world_size;
	enum dist_backend backend;
	int cuda_device;     /* NCCL: the device to use; from_env: LOCAL_RANK
			      * (dlaunch-train sets the one its kernels use) */
	uint64_t timeout_ms; /* bound on every wait; default 300000 */
	/* when not NULL and non-zero, the bootstrap in dist_init gives up
	 * (within about 50 ms) with DL_ECLOSED: another thread raises it to
	 * cancel the forming of a group no longer wanted. NULL: none. */
	const atomic_int *cancel;
	/* when not NULL, asked on the thread that called dist_init at least
	 * every 50 ms while the group forms: a non-zero answer (the process
	 * was told to stop, by a signal) gives up as a raised cancel does */
	int (*stop)(void *arg);
	void *stop_arg;
	/* the flight recorder (dist_flight.h) this group records its
	 * collectives in, or NULL: none; owned by the caller, and must
	 * outlive the group. dist_config_from_env leaves it NULL. */
	struct dist_flight *flight;
};

struct dist;
struct dist_req;

/* dist_config_from_env fills cfg from MASTER_ADDR, MASTER_PORT, RANK,
 * WORLD_SIZE and LOCAL_RANK (absent RANK/WORLD_SIZE mean a world of one),
 * backend TCP; writes a message naming the bad variable into err. */
int dist_config_from_env(struct dist_config *cfg, char *err, size_t err_size);

/* dist_init forms the group; *out is owned by the caller (dist_free). */
int dist_init(const struct dist_config *cfg, struct dist **out, char *err,
	      size_t err_size);
/* dist_init_listener is dist_init for a caller that already holds rank 0's
 * bootstrap listener: on rank 0, listen_fd (a listening TCP socket, e.g.
 * bound to port 0 so that tests never collide) is used instead of binding
 * MASTER_PORT; other ranks just close it. listen_fd may be -1 (then it is
 * dist_init); otherwise it is owned by the call, success or not. */
int dist_init_listener(const struct dist_config *cfg, int listen_fd,
		       struct dist **out, char *err, size_t err_size);
/* dist_free closes connections and frees the group; pending requests must
 * have been waited for. NULL is allowed. */
void dist_free(struct dist *d);

/* dist_abort: see above. Safe from another thread while an operation
 * runs, as long as d is not being freed; idempotent. */
void dist_abort(struct dist *d);
/* dist_aborted: dist_abort was called on d */
int dist_aborted(const struct dist *d);

int dist_rank(const struct dist *d);
int dist_world_size(const struct dist *d);
enum dist_backend dist_get_backend(const struct dist *d);
size_t dist_dtype_size(enum dist_dtype dtype);
const char *dist_backend_name(enum dist_backend backend);

/* dist_set_stream: NCCL only; each later operation is ordered after the
 * work queued on this cudaStream_t so far, and runs on the library's own
 * stream, beside what is queued on it afterwards (NULL: no ordering).
 * Ignored by TCP. */
void dist_set_stream(struct dist *d, void *cuda_stream);

/* Point to point: count elements of dtype to/from peer. */
int dist_send(struct dist *d, const void *buf, size_t count,
	      enum dist_dtype dtype, int peer);
int dist_recv(struct dist *d, void *buf, size_t count, enum dist_dtype dtype,
	      int peer);
/* Non-blocking forms: the buffer must stay valid until dist_wait. */
int dist_isend(struct dist *d, const void *buf, size_t count,
	       enum dist_dtype dtype, int peer, struct dist_req **req);
int dist_irecv(struct dist *d, void *buf, size_t count, enum dist_dtype dtype,
	       int peer, struct dist_req **req);
/* dist_wait blocks until req completes, frees it and returns its status. */
int dist_wait(struct dist_req *req);

/* Collectives. send == recv is allowed (in place) for reduce/all_reduce. */
int dist_broadcast(struct dist *d, void *buf, size_t count,
		   enum dist_dtype dtype, int root);
int dist_reduce(struct dist *d, const void *send, void *recv, size_t count,
		enum dist_dtype dtype, enum dist_op op, int root);
int dist_all_reduce(struct dist *d, const void *send, void *recv, size_t count,
		    enum dist_dtype dtype, enum dist_op op);
/* dist_iall_reduce: in-place, asynchronous; completes through dist_wait. */
int dist_iall_reduce(struct dist *d, void *buf, size_t count,
		     enum dist_dtype dtype, enum dist_op op,
		     struct dist_req **req);
/* dist_all_gather: recv holds world_size * count elements, rank order. */
int dist_all_gather(struct dist *d, const void *send, void *recv, size_t count,
		    enum dist_dtype dtype);
int dist_barrier(struct dist *d);

#endif
