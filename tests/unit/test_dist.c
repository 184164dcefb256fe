/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_dist.c - unit tests of the collective library: the TCP backend,
 * and the NCCL backend on device memory where the build has CUDA and the
 * machine a GPU (the test_nccl_* cases; skipped otherwise).
 *
 * Every operation is checked against a serial reference at world sizes
 * 1 to 4 (2 to 4 for point to point), from one element through small odd
 * counts to one case of more than 10 MiB per operation (and reduction op)
 * and world size, a count that no world size or chunk size divides. The
 * data is a fixed function of rank, index and seed.
 *
 * Each group test forks one process per rank on loopback. The parent binds
 * rank 0's bootstrap listener on 127.0.0.1 port 0 before forking and rank
 * 0 inherits it (dist_init_listener), so tests never collide on ports.
 * Children report through their exit status (0: every check passed; the
 * failing check is printed on stderr); the parent waits for them with a
 * deadline and kills what is left.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../trainer/dist/dist.h"
#include "../../trainer/dist/dist_flight.h"
#include "dlaunch/clock.h"
#include "dlaunch/crc32c.h"
#include "dlaunch/error.h"
#include "dlaunch/log.h"

#define MAX_WORLD	  8
#define GROUP_DEADLINE_MS 90000
#define NCCL_TIMEOUT_MS	  60000 /* communicator set-up takes seconds */

#ifdef DLAUNCH_HAVE_CUDA
#include <cuda_runtime.h> /* the NCCL cases' device buffers */
#endif

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr,                                        \
				"rank %d: check failed at %s:%d: %s\n",        \
				test_rank, __FILE__, __LINE__, #cond);         \
			return 1;                                              \
		}                                                              \
	} while (0)

#define CHECK_RC(expr)                                                         \
	do {                                                                   \
		int check_rc_ = (expr);                                        \
		if (check_rc_ != 0) {                                          \
			fprintf(stderr, "rank %d: %s at %s:%d returned %s\n",  \
				test_rank, #expr, __FILE__, __LINE__,          \
				dl_strerror(check_rc_));                       \
			return 1;                                              \
		}                                                              \
	} while (0)

static int test_rank = -1; /* in a child: its rank, for messages */
/* in a child on the NCCL backend: operations work on device memory */
static int on_device;

/* ---- process harness ---- */

static int listen_loopback(uint16_t *port)
{
	struct sockaddr_in sin = {0};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 128), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

static struct dist_config make_cfg(uint16_t port, int rank, int world,
				   uint64_t timeout_ms)
{
	struct dist_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.master_addr, sizeof(cfg.master_addr), "127.0.0.1");
	cfg.master_port = port;
	cfg.rank = rank;
	cfg.world_size = world;
	cfg.backend = DIST_BACKEND_TCP;
	cfg.cuda_device = rank; /* NCCL: one device per rank */
	cfg.timeout_ms = timeout_ms;
	return cfg;
}

typedef int (*rank_fn)(const struct dist_config *cfg, int listen_fd, void *arg);

/* spawn: forks a child that runs fn and exits with its result. */
static pid_t spawn(const struct dist_config *cfg, int listen_fd, rank_fn fn,
		   void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		test_rank = cfg->rank;
		alarm(GROUP_DEADLINE_MS / 1000 + 10); /* last line of defence */
		int code = fn(cfg, listen_fd, arg);
		fflush(NULL);
		exit(code);
	}
	return pid;
}

/* reap: waits for n children until the deadline; codes[i] gets the exit
 * status (or 200 + signal, or 255 when killed at the deadline). */
static void reap(pid_t *pids, int n, int *codes, uint64_t deadline_ms)
{
	int left = n;
	for (int i = 0; i < n; i++)
		codes[i] = -1;
	while (left > 0) {
		for (int i = 0; i < n; i++) {
			int status;
			if (codes[i] != -1)
				continue;
			pid_t got = waitpid(pids[i], &status, WNOHANG);
			if (got != pids[i])
				continue;
			codes[i] = WIFEXITED(status) ? WEXITSTATUS(status)
						     : 200 + WTERMSIG(status);
			left--;
		}
		if (left == 0)
			break;
		if (clock_now_ms() > deadline_ms) {
			for (int i = 0; i < n; i++) {
				if (codes[i] != -1)
					continue;
				kill(pids[i], SIGKILL);
				waitpid(pids[i], NULL, 0);
				codes[i] = 255;
			}
			break;
		}
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
	}
}

typedef int (*body_fn)(struct dist *d, void *arg);

struct body_call {
	body_fn body;
	void *arg;
};

static int run_body(const struct dist_config *cfg, int listen_fd, void *arg)
{
	struct body_call *call = arg;
	struct dist *d = NULL;
	char err[512] = "";
	on_device = cfg->backend == DIST_BACKEND_NCCL;
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "rank %d: dist_init: %s: %s\n", cfg->rank,
			dl_strerror(rc), err);
		return 100;
	}
	rc = call->body(d, call->arg);
	dist_free(d);
	return rc;
}

/* run_group_on: world ranks each run body on a fresh group of the
 * backend; asserts that every one of them passed. */
static void run_group_on(enum dist_backend backend, int world,
			 uint64_t timeout_ms, body_fn body, void *arg)
{
	pid_t pids[MAX_WORLD];
	int codes[MAX_WORLD];
	uint16_t port;
	struct body_call call = {body, arg};
	int lfd = listen_loopback(&port);
	for (int r = 0; r < world; r++) {
		struct dist_config cfg = make_cfg(port, r, world, timeout_ms);
		cfg.backend = backend;
		pids[r] = spawn(&cfg, lfd, run_body, &call);
	}
	close(lfd);
	reap(pids, world, codes, clock_now_ms() + GROUP_DEADLINE_MS);
	for (int r = 0; r < world; r++) {
		if (codes[r] != 0)
			fprintf(stderr, "world %d: rank %d exited with %d\n",
				world, r, codes[r]);
		assert_int_equal(codes[r], 0);
	}
}

static void run_group(int world, uint64_t timeout_ms, body_fn body, void *arg)
{
	run_group_on(DIST_BACKEND_TCP, world, timeout_ms, body, arg);
}

/* tcp_worlds: runs body on the TCP backend at each world size from
 * min_world to 4 (nccl_worlds is its GPU counterpart) */
static void tcp_worlds(int min_world, uint64_t timeout_ms, body_fn body,
		       void *arg)
{
	for (int w = min_world; w <= 4; w++)
		run_group(w, timeout_ms, body, arg);
}

/* ---- data and serial references ---- */

static int64_t input_value(int rank, size_t i, unsigned seed)
{
	return (int64_t)((((uint64_t)rank + 1) * 7 + i * 13 + seed) % 101) - 50;
}

static void put_elem(enum dist_dtype dtype, void *buf, size_t i, int64_t v)
{
	switch (dtype) {
	case DIST_FLOAT32: ((float *)buf)[i] = (float)v; break;
	case DIST_FLOAT64: ((double *)buf)[i] = (double)v; break;
	case DIST_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
	case DIST_INT64: ((int64_t *)buf)[i] = v; break;
	case DIST_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(v + 50); break;
	}
}

static void fill_input(enum dist_dtype dtype, void *buf, size_t count, int rank,
		       unsigned seed)
{
	for (size_t i = 0; i < count; i++)
		put_elem(dtype, buf, i, input_value(rank, i, seed));
}

/* large_count: a count of elements of es bytes that makes more than
 * 10 MiB and that no world size from 2 to 4 divides (odd, not a multiple
 * of 3); its byte size, an odd multiple of es, is then a multiple of no
 * segment, chunk or receive-ring size either. */
static size_t large_count(size_t es)
{
	size_t n = (10u << 20) / es + 1;
	while (n % 2 == 0 || n % 3 == 0)
		n++;
	return n;
}

/* expected_ok: compares element i of got with the serial reduction of
 * every rank's input (integer-valued, so any order is exact). One
 * exception: NCCL's ncclAvg multiplies each floating-point operand by
 * 1/world before summing, which can round differently from the sum
 * divided by world, so on device AVG of floats is compared within a
 * few units in the last place. */
static int expected_ok(enum dist_dtype dtype, enum dist_op op, int world,
		       const void *got, size_t i, unsigned seed)
{
	int64_t acc = 0;
	for (int r = 0; r < world; r++) {
		int64_t v = input_value(r, i, seed);
		if (dtype == DIST_UINT8)
			v += 50;
		if (r == 0)
			acc = v;
		else if (op == DIST_SUM || op == DIST_AVG)
			acc += v;
		else if (op == DIST_MAX)
			acc = v > acc ? v : acc;
		else
			acc = v < acc ? v : acc;
	}
	switch (dtype) {
	case DIST_FLOAT32: {
		float want = (float)acc;
		if (op == DIST_AVG)
			want = want / (float)world;
		if (op == DIST_AVG && on_device)
			return fabs((double)((const float *)got)[i] - want) <
			       1e-4;
		return memcmp(&want, (const float *)got + i, 4) == 0;
	}
	case DIST_FLOAT64: {
		double want = (double)acc;
		if (op == DIST_AVG)
			want = want / (double)world;
		if (op == DIST_AVG && on_device)
			return fabs(((const double *)got)[i] - want) < 1e-12;
		return memcmp(&want, (const double *)got + i, 8) == 0;
	}
	case DIST_INT32:
		return ((const int32_t *)got)[i] ==
		       (int32_t)(op == DIST_AVG ? acc / world : acc);
	case DIST_INT64:
		return ((const int64_t *)got)[i] ==
		       (op == DIST_AVG ? acc / world : acc);
	case DIST_UINT8: {
		uint8_t sum = (uint8_t)acc;
		return ((const uint8_t *)got)[i] ==
		       (op == DIST_AVG ? (uint8_t)(sum / world) : sum);
	}
	}
	return 0;
}

/* check_reduced: got[0, n) against the serial reduction of every rank's
 * input; names the first wrong element. 0 when all are right. */
static int check_reduced(const char *what, enum dist_dtype dtype,
			 enum dist_op op, int world, const void *got, size_t n,
			 unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		if (!expected_ok(dtype, op, world, got, i, seed)) {
			fprintf(stderr,
				"rank %d: %s of %zu elements (dtype %d, op %d, "
				"world %d): element %zu is wrong\n",
				test_rank, what, n, (int)dtype, (int)op, world,
				i);
			return 1;
		}
	}
	return 0;
}

/* check_input: got[0, n) is exactly rank's input (seed), what a
 * broadcast, a gather or a receive must deliver. 0 when it is. */
static int check_input(const char *what, enum dist_dtype dtype, const void *got,
		       size_t n, int rank, unsigned seed)
{
	size_t es = dist_dtype_size(dtype);
	union {
		double f64;
		int64_t i64;
		unsigned char bytes[8];
	} want;
	for (size_t i = 0; i < n; i++) {
		put_elem(dtype, &want, 0, input_value(rank, i, seed));
		if (memcmp(want.bytes, (const unsigned char *)got + i * es,
			   es) != 0) {
			fprintf(stderr,
				"rank %d: %s of %zu elements (dtype %d): "
				"element %zu is not rank %d's\n",
				test_rank, what, n, (int)dtype, i, rank);
			return 1;
		}
	}
	return 0;
}

static const enum dist_dtype all_dtypes[] = {
    DIST_FLOAT32, DIST_FLOAT64, DIST_INT32, DIST_INT64, DIST_UINT8};
static const enum dist_op all_ops[] = {DIST_SUM, DIST_AVG, DIST_MAX, DIST_MIN};
/* the dtype each op's large case uses: every dtype appears somewhere */
static const enum dist_dtype large_dtypes[] = {DIST_FLOAT32, DIST_FLOAT64,
					       DIST_INT32, DIST_UINT8};

/* ---- buffers ---- */

/* The memory an operation works on (op) and the host copy the checks
 * read (host). On the TCP backend they are the same memory, and put and
 * get do nothing; on NCCL (on_device) op is device memory and put and
 * get copy. Bodies fill host, put, run, get and check host. */
struct tbuf {
	unsigned char *host;
	unsigned char *op;
	size_t bytes;
};

#ifdef DLAUNCH_HAVE_CUDA
static int cuda_ok(const char *what, cudaError_t ce)
{
	if (ce == cudaSuccess)
		return 1;
	fprintf(stderr, "rank %d: %s: %s\n", test_rank, what,
		cudaGetErrorString(ce));
	return 0;
}
#endif

/* tbuf_put: host to op. The copy runs on CUDA's default stream, which the
 * library's own stream does not wait for: the device is synchronised
 * before an operation may read the bytes. 0 on success. */
static int tbuf_put(struct tbuf *b)
{
#ifdef DLAUNCH_HAVE_CUDA
	if (on_device)
		return !(
		    cuda_ok("upload", cudaMemcpy(b->op, b->host, b->bytes,
						 cudaMemcpyHostToDevice)) &&
		    cuda_ok("upload", cudaDeviceSynchronize()));
#endif
	(void)b;
	return 0;
}

/* tbuf_get: op to host, once the device has finished everything. */
static int tbuf_get(struct tbuf *b)
{
#ifdef DLAUNCH_HAVE_CUDA
	if (on_device)
		return !(
		    cuda_ok("download", cudaDeviceSynchronize()) &&
		    cuda_ok("download", cudaMemcpy(b->host, b->op, b->bytes,
						   cudaMemcpyDeviceToHost)));
#endif
	(void)b;
	return 0;
}

/* tbuf_new: bytes of memory (at least one), filled with a pattern that
 * no input holds, so that bytes an operation failed to write show. */
static int tbuf_new(struct tbuf *b, size_t bytes)
{
	b->bytes = bytes;
	b->host = malloc(bytes + 1);
	b->op = b->host;
	if (b->host == NULL)
		return 1;
	memset(b->host, 0xa5, bytes);
#ifdef DLAUNCH_HAVE_CUDA
	if (on_device) {
		void *dev = NULL;
		if (!cuda_ok("cudaMalloc", cudaMalloc(&dev, bytes + 1))) {
			free(b->host);
			b->host = b->op = NULL;
			return 1;
		}
		b->op = dev;
		return tbuf_put(b);
	}
#endif
	return 0;
}

static void tbuf_free(struct tbuf *b)
{
#ifdef DLAUNCH_HAVE_CUDA
	if (on_device && b->op != NULL)
		cudaFree(b->op);
#endif
	free(b->host);
	b->host = b->op = NULL;
}

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
static int body_all_reduce_matrix(struct dist *d, void *arg)
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
static int body_all_reduce_bits(struct dist *d, void *arg)
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
static int body_all_reduce_large(struct dist *d, void *arg)
{
	(void)arg;
	for (unsigned o = 0; o < 4; o++) {
		enum dist_dtype dt = large_dtypes[o];
		CHECK(all_reduce_case(d, large_count(dist_dtype_size(dt)), dt,
				      all_ops[o], 50 + o, o & 1) == 0);
	}
	return 0;
}

/* One float32 all-reduce of lc->count elements. */
struct large_case {
	size_t count;
	enum dist_op op;
};

static int body_all_reduce_one(struct dist *d, void *arg)
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

static int body_broadcast(struct dist *d, void *arg)
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

static int body_reduce(struct dist *d, void *arg)
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

static int body_all_gather(struct dist *d, void *arg)
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
static int body_send_recv(struct dist *d, void *arg)
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
static int body_isend_irecv(struct dist *d, void *arg)
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
static int body_async(struct dist *d, void *arg)
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
static int body_barrier(struct dist *d, void *arg)
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

/* ---- tests ---- */

static void test_all_reduce_matrix(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_all_reduce_matrix, NULL);
}

static void test_all_reduce_bits(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_all_reduce_bits, NULL);
}

static void test_all_reduce_large(void **state)
{
	struct large_case c2 = {10u << 20, DIST_SUM}; /* 40 MB, even */
	(void)state;
	tcp_worlds(1, 30000, body_all_reduce_large, NULL);
	run_group(2, 30000, body_all_reduce_one, &c2);
}

static void test_broadcast(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_broadcast, NULL);
}

static void test_reduce(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_reduce, NULL);
}

static void test_all_gather(void **state)
{
	(void)state;
	tcp_worlds(1, 20000, body_all_gather, NULL);
}

static void test_send_recv(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_send_recv, NULL);
}

static void test_isend_irecv(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_isend_irecv, NULL);
}

static void test_async(void **state)
{
	(void)state;
	tcp_worlds(2, 20000, body_async, NULL);
}

static void test_barrier(void **state)
{
	(void)state;
	for (int w = 2; w <= 4; w++) {
		int *arrived = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		assert_true(arrived != MAP_FAILED);
		run_group(w, 20000, body_barrier, arrived);
		munmap(arrived, 4096);
	}
}

/* ---- configuration and arguments (in this process, no sockets) ---- */

static void clear_env(void)
{
	const char *vars[] = {"RANK",	     "WORLD_SIZE",
			      "LOCAL_RANK",  "MASTER_ADDR",
			      "MASTER_PORT", "DLAUNCH_DIST_TIMEOUT"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void test_config_from_env(void **state)
{
	struct dist_config cfg;
	char err[256];
	(void)state;
	clear_env();
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.rank, 0);
	assert_int_equal(cfg.world_size, 1);
	assert_int_equal(cfg.backend, DIST_BACKEND_TCP);
	assert_true(cfg.timeout_ms == 300000);

	setenv("RANK", "1", 1);
	setenv("WORLD_SIZE", "4", 1);
	setenv("LOCAL_RANK", "3", 1);
	setenv("MASTER_ADDR", "head.example", 1);
	setenv("MASTER_PORT", "29500", 1);
	setenv("DLAUNCH_DIST_TIMEOUT", "5s", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)), 0);
	assert_int_equal(cfg.rank, 1);
	assert_int_equal(cfg.world_size, 4);
	assert_int_equal(cfg.cuda_device, 3);
	assert_string_equal(cfg.master_addr, "head.example");
	assert_int_equal(cfg.master_port, 29500);
	assert_true(cfg.timeout_ms == 5000);

	setenv("RANK", "4", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_ERANGE);
	assert_non_null(strstr(err, "RANK=4"));
	setenv("RANK", "x1", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "RANK"));
	setenv("RANK", "1", 1);
	setenv("MASTER_PORT", "70000", 1);
	assert_int_not_equal(dist_config_from_env(&cfg, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "MASTER_PORT"));
	unsetenv("MASTER_PORT");
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "MASTER_PORT"));
	setenv("MASTER_PORT", "29500", 1);
	unsetenv("MASTER_ADDR");
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "MASTER_ADDR"));
	setenv("MASTER_ADDR", "head.example", 1);
	setenv("DLAUNCH_DIST_TIMEOUT", "soon", 1);
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "DLAUNCH_DIST_TIMEOUT"));
	unsetenv("DLAUNCH_DIST_TIMEOUT");
	unsetenv("WORLD_SIZE");
	assert_int_equal(dist_config_from_env(&cfg, err, sizeof(err)),
			 DL_EINVAL);
	assert_non_null(strstr(err, "WORLD_SIZE"));
	clear_env();
}

/* A world of one: every operation is local; bad arguments are refused. */
static void test_world_one_and_bad_args(void **state)
{
	struct dist_config cfg = make_cfg(0, 0, 1, 1000);
	struct dist *d = NULL;
	struct dist_req *req = NULL;
	char err[256];
	float a[3] = {1, 2, 3}, b[3] = {0}, g[3] = {0};
	(void)state;
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), 0);
	assert_int_equal(dist_rank(d), 0);
	assert_int_equal(dist_world_size(d), 1);
	assert_int_equal(dist_get_backend(d), DIST_BACKEND_TCP);
	assert_int_equal(dist_all_reduce(d, a, b, 3, DIST_FLOAT32, DIST_AVG),
			 0);
	assert_memory_equal(a, b, sizeof(a));
	assert_int_equal(dist_broadcast(d, a, 3, DIST_FLOAT32, 0), 0);
	assert_int_equal(dist_reduce(d, a, g, 3, DIST_FLOAT32, DIST_MAX, 0), 0);
	assert_memory_equal(a, g, sizeof(a));
	memset(g, 0, sizeof(g));
	assert_int_equal(dist_all_gather(d, a, g, 3, DIST_FLOAT32), 0);
	assert_memory_equal(a, g, sizeof(a));
	assert_int_equal(dist_barrier(d), 0);
	assert_int_equal(
	    dist_iall_reduce(d, a, 3, DIST_FLOAT32, DIST_SUM, &req), 0);
	assert_int_equal(dist_wait(req), 0);
	assert_int_equal(dist_all_reduce(d, a, b, 0, DIST_FLOAT32, DIST_SUM),
			 0);

	/* refused, nothing done */
	assert_int_equal(dist_send(d, a, 3, DIST_FLOAT32, 0), DL_EINVAL);
	assert_int_equal(dist_recv(d, a, 3, DIST_FLOAT32, 1), DL_EINVAL);
	req = (struct dist_req *)&req;
	assert_int_equal(dist_isend(d, a, 3, DIST_FLOAT32, -1, &req),
			 DL_EINVAL);
	assert_int_equal(dist_broadcast(d, a, 3, DIST_FLOAT32, 1), DL_EINVAL);
	assert_int_equal(
	    dist_all_reduce(d, a, b, 3, (enum dist_dtype)9, DIST_SUM),
	    DL_EINVAL);
	assert_int_equal(
	    dist_all_reduce(d, a, b, 3, DIST_FLOAT32, (enum dist_op)7),
	    DL_EINVAL);
	assert_int_equal(dist_all_reduce(d, NULL, b, 3, DIST_FLOAT32, DIST_SUM),
			 DL_EINVAL);
	assert_int_equal(
	    dist_all_reduce(d, a, b, SIZE_MAX / 2, DIST_FLOAT32, DIST_SUM),
	    DL_ERANGE);
	assert_int_equal(dist_wait(NULL), DL_EINVAL);
	dist_free(d);
	dist_free(NULL);

	/* configurations that cannot form a group */
	cfg = make_cfg(0, 0, 0, 1000);
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_ERANGE);
	assert_null(d);
	assert_non_null(strstr(err, "world size"));
	cfg = make_cfg(1234, 2, 2, 1000);
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_ERANGE);
	assert_non_null(strstr(err, "rank 2"));
	cfg = make_cfg(0, 0, 2, 1000);
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_EINVAL);
	assert_non_null(strstr(err, "port"));
}

/* The master port taken by someone else: a clear error at once. */
static void test_master_port_busy(void **state)
{
	uint16_t port;
	int lfd = listen_loopback(&port);
	struct dist_config cfg = make_cfg(port, 0, 2, 5000);
	struct dist *d = NULL;
	char err[256];
	(void)state;
	uint64_t start = clock_now_ms();
	assert_int_equal(dist_init(&cfg, &d, err, sizeof(err)), DL_ESYS);
	assert_true(clock_now_ms() - start < 2000);
	assert_non_null(strstr(err, "cannot listen"));
	close(lfd);
}

/* rank_nccl_init: a world of one on the NCCL backend. */
static int rank_nccl_init(const struct dist_config *cfg, int listen_fd,
			  void *arg)
{
	struct dist *d = NULL;
	char err[256] = "";
	(void)arg;
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
#ifdef DLAUNCH_HAVE_CUDA
	/* this build has NCCL; without a GPU the init fails cleanly */
	if (rc == 0) {
		CHECK(dist_get_backend(d) == DIST_BACKEND_NCCL);
		dist_free(d);
		return 0;
	}
	CHECK(err[0] != 0);
#else
	CHECK(rc == DL_ENOTSUP);
	CHECK(strstr(err, "nccl") != NULL);
	CHECK(strstr(err, "without CUDA") != NULL);
#endif
	CHECK(d == NULL);
	return 0;
}

/* In a child, like every use of CUDA here: CUDA initialised in this
 * process would not survive into the ranks it forks later. */
static void test_nccl_backend(void **state)
{
	struct dist_config cfg = make_cfg(0, 0, 1, NCCL_TIMEOUT_MS);
	pid_t pid;
	int code;
	(void)state;
	cfg.backend = DIST_BACKEND_NCCL;
	pid = spawn(&cfg, -1, rank_nccl_init, NULL);
	reap(&pid, 1, &code, clock_now_ms() + GROUP_DEADLINE_MS);
	assert_int_equal(code, 0);
}

/* ---- the NCCL backend on device memory (skipped without a GPU) ---- */

#ifdef DLAUNCH_HAVE_CUDA
static int rank_count_gpus(const struct dist_config *cfg, int listen_fd,
			   void *arg)
{
	int n = 0;
	(void)cfg;
	(void)listen_fd;
	(void)arg;
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		return 0;
	return n < 100 ? n : 100;
}
#endif

/* gpu_count: how many CUDA devices the ranks could use (0 in a build
 * without CUDA), asked once, in a child: this process must not
 * initialise CUDA before it forks the ranks. */
static int gpu_count(void)
{
	static int count = -1;
#ifdef DLAUNCH_HAVE_CUDA
	if (count < 0) {
		struct dist_config cfg = make_cfg(0, 0, 1, 1000);
		pid_t pid = spawn(&cfg, -1, rank_count_gpus, NULL);
		reap(&pid, 1, &count, clock_now_ms() + 60000);
		if (count > 100) {
			fprintf(stderr, "counting CUDA devices failed (%d)\n",
				count);
			count = 0;
		}
	}
#endif
	return count < 0 ? 0 : count;
}

/* nccl_worlds: runs body on the NCCL backend at each world size from
 * min_world to 4 that the devices allow (one device per rank); skips
 * the test when there are fewer than min_world devices. */
static void nccl_worlds(int min_world, body_fn body, void *arg)
{
	int gpus = gpu_count();
	if (gpus < min_world) {
		fprintf(stderr, "%d CUDA device(s), %d needed: skipped\n", gpus,
			min_world);
		skip();
	}
	for (int w = min_world; w <= 4 && w <= gpus; w++)
		run_group_on(DIST_BACKEND_NCCL, w, NCCL_TIMEOUT_MS, body, arg);
}

static void test_nccl_all_reduce(void **state)
{
	(void)state;
	nccl_worlds(1, body_all_reduce_matrix, NULL);
	nccl_worlds(1, body_all_reduce_large, NULL);
}

static void test_nccl_broadcast(void **state)
{
	(void)state;
	nccl_worlds(1, body_broadcast, NULL);
}

static void test_nccl_reduce(void **state)
{
	(void)state;
	nccl_worlds(1, body_reduce, NULL);
}

static void test_nccl_all_gather(void **state)
{
	(void)state;
	nccl_worlds(1, body_all_gather, NULL);
}

static void test_nccl_send_recv(void **state)
{
	(void)state;
	nccl_worlds(2, body_send_recv, NULL);
}

/* the crossing order: every rank posts its isend before its irecv */
static void test_nccl_isend_irecv(void **state)
{
	(void)state;
	nccl_worlds(2, body_isend_irecv, NULL);
}

static void test_nccl_async(void **state)
{
	(void)state;
	nccl_worlds(1, body_async, NULL);
}

static void test_nccl_barrier(void **state)
{
	int *arrived = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	(void)state;
	assert_true(arrived != MAP_FAILED);
	if (gpu_count() < 2) {
		munmap(arrived, 4096);
		fprintf(stderr, "%d CUDA device(s), 2 needed: skipped\n",
			gpu_count());
		skip();
	}
	for (int w = 2; w <= 4 && w <= gpu_count(); w++) {
		memset(arrived, 0, 4096);
		run_group_on(DIST_BACKEND_NCCL, w, NCCL_TIMEOUT_MS,
			     body_barrier, arrived);
	}
	munmap(arrived, 4096);
}

/* ---- failures across processes ---- */

struct fail_shared {
	int iters[MAX_WORLD];
	int done;
	int started;
};

static struct fail_shared *shared_new(void)
{
	void *p = mmap(NULL, sizeof(struct fail_shared), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0, sizeof(struct fail_shared));
	return p;
}

/* wait_shared: polls *flag (set by another process) until it reaches
 * value or the deadline passes; returns whether it did. */
static int wait_shared(int *flag, int value, uint64_t timeout_ms)
{
	uint64_t deadline = clock_now_ms() + timeout_ms;
	while (__atomic_load_n(flag, __ATOMIC_SEQ_CST) < value) {
		if (clock_now_ms() > deadline)
			return 0;
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	return 1;
}

/* Survivors of a peer killed mid-loop: all-reduce until it fails; the
 * failure must come quickly and be ECLOSED or ETIMEDOUT, and sticky. */
static int body_until_peer_dies(struct dist *d, void *arg)
{
	struct fail_shared *sh = arg;
	size_t n = 256 << 10;
	float *x = calloc(n, sizeof(float));
	int rc = 0;
	CHECK(x != NULL);
	for (int i = 0; i < 5000; i++) {
		uint64_t start = clock_now_ms();
		rc = dist_all_reduce(d, x, x, n, DIST_FLOAT32, DIST_SUM);
		if (rc != 0) {
			CHECK(clock_now_ms() - start < 5000 + 2000);
			break;
		}
		__atomic_store_n(&sh->iters[dist_rank(d)], i + 1,
				 __ATOMIC_SEQ_CST);
	}
	free(x);
	if (dist_rank(d) == 1)
		return 0; /* not reached: killed */
	CHECK(rc == DL_ECLOSED || rc == DL_ETIMEDOUT);
	CHECK(dist_barrier(d) == rc);
	return 0;
}

static void test_peer_dies(void **state)
{
	struct fail_shared *sh = shared_new();
	struct body_call call = {body_until_peer_dies, sh};
	pid_t pids[3];
	int codes[3];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	for (int r = 0; r < 3; r++) {
		struct dist_config cfg = make_cfg(port, r, 3, 5000);
		pids[r] = spawn(&cfg, lfd, run_body, &call);
	}
	close(lfd);
	assert_true(wait_shared(&sh->iters[1], 5, 30000));
	kill(pids[1], SIGKILL);
	reap(pids, 3, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 200 + SIGKILL);
	assert_int_equal(codes[2], 0);
	munmap(sh, sizeof(*sh));
}

/* A peer that stays connected but never takes part: DL_ETIMEDOUT after
 * the group's timeout, not a hang. */
static int body_silent_peer(struct dist *d, void *arg)
{
	struct fail_shared *sh = arg;
	float x[1000] = {0};
	if (dist_rank(d) == 1) {
		/* hold the connections open until rank 0 has given up */
		CHECK(wait_shared(&sh->done, 1, 30000));
		return 0;
	}
	uint64_t start = clock_now_ms();
	int rc = dist_all_reduce(d, x, x, 1000, DIST_FLOAT32, DIST_SUM);
	uint64_t took = clock_now_ms() - start;
	__atomic_store_n(&sh->done, 1, __ATOMIC_SEQ_CST);
	CHECK(rc == DL_ETIMEDOUT);
	CHECK(took >= 900 && took < 5000);
	CHECK(dist_broadcast(d, x, 10, DIST_FLOAT32, 0) == DL_ETIMEDOUT);
	return 0;
}

static void test_peer_silent(void **state)
{
	struct fail_shared *sh = shared_new();
	(void)state;
	run_group(2, 1000, body_silent_peer, sh);
	munmap(sh, sizeof(*sh));
}

/* init that must fail: exits 0 when dist_init returned want (and, for
 * rank 0, its message names the missing rank). */
struct init_expect {
	int want;
	const char *needle;
	uint64_t min_ms, max_ms;
};

static int rank_init_fails(const struct dist_config *cfg, int listen_fd,
			   void *arg)
{
	struct init_expect *ex = arg;
	struct dist *d = NULL;
	char err[512] = "";
	uint64_t start = clock_now_ms();
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
	uint64_t took = clock_now_ms() - start;
	fprintf(stderr, "rank %d: init: %s: %s\n", cfg->rank, dl_strerror(rc),
		err);
	dist_free(d);
	/* a rank waiting on rank 0 may instead see rank 0 give up first */
	CHECK(rc == ex->want ||
	      (cfg->rank != 0 && ex->want == DL_ETIMEDOUT && rc == DL_ECLOSED));
	CHECK(took >= ex->min_ms && took <= ex->max_ms);
	CHECK(cfg->rank != 0 || ex->needle == NULL ||
	      strstr(err, ex->needle) != NULL);
	return 0;
}

static void test_rank_never_arrives(void **state)
{
	struct init_expect ex = {DL_ETIMEDOUT, "rank 2", 900, 5000};
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	for (int r = 0; r < 2; r++) {
		struct dist_config cfg = make_cfg(port, r, 3, 1000);
		pids[r] = spawn(&cfg, lfd, rank_init_fails, &ex);
	}
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
}

static int body_one_all_reduce(struct dist *d, void *arg)
{
	int64_t x[5];
	(void)arg;
	fill_input(DIST_INT64, x, 5, dist_rank(d), 77);
	CHECK_RC(dist_all_reduce(d, x, x, 5, DIST_INT64, DIST_SUM));
	for (size_t i = 0; i < 5; i++)
		CHECK(expected_ok(DIST_INT64, DIST_SUM, dist_world_size(d), x,
				  i, 77));
	return 0;
}

static int connect_loopback(uint16_t port)
{
	struct sockaddr_in sin = {0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* Strangers on the bootstrap port (an HTTP request, a silent connection,
 * a short one) and a rank of another world size are turned away; the
 * real group still forms. */
static void test_bootstrap_strangers(void **state)
{
	const char http[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
			    "0123456789012345678901234567890123456789";
	struct body_call call = {body_one_all_reduce, NULL};
	struct init_expect ex = {DL_ECONFLICT, NULL, 0, 10000};
	pid_t pids[2], impostor;
	int codes[2], code;
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	int c1 = connect_loopback(port), c2 = connect_loopback(port);
	int c3 = connect_loopback(port);
	assert_int_equal(write(c1, http, sizeof(http) - 1),
			 (ssize_t)sizeof(http) - 1);
	assert_int_equal(write(c3, "DLDI", 4), 4);
	close(c3);
	struct dist_config cfg = make_cfg(port, 0, 2, 10000);
	pids[0] = spawn(&cfg, lfd, run_body, &call);
	cfg = make_cfg(port, 1, 3, 10000);
	impostor = spawn(&cfg, lfd, rank_init_fails, &ex);
	reap(&impostor, 1, &code, clock_now_ms() + 30000);
	assert_int_equal(code, 0);
	cfg = make_cfg(port, 1, 2, 10000);
	pids[1] = spawn(&cfg, lfd, run_body, &call);
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
	close(c1);
	close(c2);
}

/* Rank 0 starting after the others: they retry until it listens. */
static int rank_late_master(const struct dist_config *cfg, int listen_fd,
			    void *arg)
{
	struct fail_shared *sh = arg;
	struct body_call call = {body_one_all_reduce, NULL};
	if (cfg->rank == 1)
		__atomic_store_n(&sh->started, 1, __ATOMIC_SEQ_CST);
	return run_body(cfg, listen_fd, &call);
}

static void test_master_starts_late(void **state)
{
	struct fail_shared *sh = shared_new();
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	(void)state;
	close(listen_loopback(&port)); /* a port that was free just now */
	struct dist_config cfg = make_cfg(port, 1, 2, 20000);
	pids[1] = spawn(&cfg, -1, rank_late_master, sh);
	assert_true(wait_shared(&sh->started, 1, 10000));
	cfg = make_cfg(port, 0, 2, 20000);
	pids[0] = spawn(&cfg, -1, rank_late_master, sh);
	reap(pids, 2, codes, clock_now_ms() + 40000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
	munmap(sh, sizeof(*sh));
}

/* Random sizes around every threshold on larger worlds (more ranks than
 * cores here), all ops on float64 and int32. */
static int body_random_sizes(struct dist *d, void *arg)
{
	int w = dist_world_size(d), r = dist_rank(d);
	unsigned rng = 12345; /* same sequence on every rank */
	(void)arg;
	for (int iter = 0; iter < 12; iter++) {
		rng = rng * 1103515245u + 12345u;
		size_t n = (rng >> 8) % (iter < 6 ? 40000 : 400000);
		enum dist_dtype dt = iter & 1 ? DIST_INT32 : DIST_FLOAT64;
		enum dist_op op = all_ops[iter % 4];
		size_t es = dist_dtype_size(dt);
		unsigned char *x = malloc(n * es + 1);
		CHECK(x != NULL);
		fill_input(dt, x, n, r, (unsigned)iter);
		CHECK_RC(dist_all_reduce(d, x, x, n, dt, op));
		for (size_t i = 0; i < n; i++)
			if (!expected_ok(dt, op, w, x, i, (unsigned)iter)) {
				fprintf(stderr,
					"rank %d: n %zu op %d element %zu\n", r,
					n, (int)op, i);
				free(x);
				return 1;
			}
		free(x);
	}
	return 0;
}

static void test_larger_worlds(void **state)
{
	(void)state;
	run_group(5, 20000, body_random_sizes, NULL);
	run_group(8, 20000, body_random_sizes, NULL);
}

/* dist_free with an isend nobody receives: returns at once (the request
 * is cancelled), does not wait out the timeout, leaks nothing. */
static int body_free_pending(struct dist *d, void *arg)
{
	struct fail_shared *sh = arg;
	if (dist_rank(d) == 1)
		return wait_shared(&sh->done, 1, 30000) ? 0 : 1;
	size_t n = 32u << 20;
	unsigned char *b = calloc(n, 1);
	struct dist_req *req = NULL;
	CHECK(b != NULL);
	CHECK_RC(dist_isend(d, b, n, DIST_UINT8, 1, &req));
	uint64_t start = clock_now_ms();
	dist_free(d);
	CHECK(clock_now_ms() - start < 5000);
	__atomic_store_n(&sh->done, 1, __ATOMIC_SEQ_CST);
	free(b);
	return 0;
}

static int rank_free_pending(const struct dist_config *cfg, int listen_fd,
			     void *arg)
{
	struct dist *d = NULL;
	char err[512] = "";
	int rc = dist_init_listener(cfg, listen_fd, &d, err, sizeof(err));
	if (rc != 0) {
		fprintf(stderr, "rank %d: init: %s\n", cfg->rank, err);
		return 100;
	}
	rc = body_free_pending(d, arg);
	if (cfg->rank == 1)
		dist_free(d);
	return rc;
}

static void test_free_with_pending(void **state)
{
	struct fail_shared *sh = shared_new();
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	for (int r = 0; r < 2; r++) {
		struct dist_config cfg = make_cfg(port, r, 2, 20000);
		pids[r] = spawn(&cfg, lfd, rank_free_pending, sh);
	}
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
	munmap(sh, sizeof(*sh));
}

/* A raw bootstrap hello (the wire format of dist_net.c, big-endian):
 * magic, version, kind, rank, world, backend, target, nonce, port,
 * family, pad, address. */
static void craft_hello(unsigned char *p, uint32_t version, uint32_t rank,
			uint32_t world, uint32_t backend)
{
	uint32_t words[7] = {0x444c4449u, version, 1, rank, world, backend, 0};
	memset(p, 0, 56);
	for (int i = 0; i < 7; i++) {
		uint32_t be = htonl(words[i]);
		memcpy(p + 4 * i, &be, 4);
	}
	p[36] = 0x12; /* port 0x1234 */
	p[37] = 0x34;
	p[38] = 4;
	p[40] = 127;
	p[43] = 1;
}

/* hello_answer: sends a crafted hello; returns the status in rank 0's
 * reply, or 1 when it closed the connection without one. */
static int hello_answer(uint16_t port, uint32_t version, uint32_t rank,
			uint32_t world, uint32_t backend)
{
	unsigned char buf[56 + 512];
	int fd = connect_loopback(port);
	craft_hello(buf, version, rank, world, backend);
	assert_int_equal(write(fd, buf, 56), 56);
	size_t got = 0;
	while (got < 28) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got < 28)
		return 1;
	uint32_t status;
	memcpy(&status, buf + 8, 4);
	return (int)(int32_t)ntohl(status);
}

/* Hellos that are well formed but wrong are answered with the reason
 * (or dropped), and do not disturb the group. */
static void test_bootstrap_bad_hellos(void **state)
{
	struct body_call call = {body_one_all_reduce, NULL};
	pid_t pids[2];
	int codes[2];
	uint16_t port;
	int lfd = listen_loopback(&port);
	(void)state;
	struct dist_config cfg = make_cfg(port, 0, 2, 10000);
	pids[0] = spawn(&cfg, lfd, run_body, &call);
	assert_int_equal(hello_answer(port, 99, 1, 2, 0), DL_ENOTSUP);
	assert_int_equal(hello_answer(port, 1, 5, 2, 0), DL_ERANGE);
	assert_int_equal(hello_answer(port, 1, 0, 2, 0), DL_ECONFLICT);
	assert_int_equal(hello_answer(port, 1, 1, 2, 1), DL_ECONFLICT);
	assert_int_equal(hello_answer(port, 1, 1, 7, 0), DL_ECONFLICT);
	cfg = make_cfg(port, 1, 2, 10000);
	pids[1] = spawn(&cfg, lfd, run_body, &call);
	close(lfd);
	reap(pids, 2, codes, clock_now_ms() + 30000);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
}

/* IPv6: MASTER_ADDR ::1, rank 0 binding MASTER_PORT itself, then a
 * group of three over the v6 loopback. */
static void test_ipv6(void **state)
{
	struct body_call call = {body_one_all_reduce, NULL};
	struct sockaddr_in6 sin6 = {0};
	socklen_t len = sizeof(sin6);
	pid_t pids[3];
	int codes[3];
	(void)state;
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	sin6.sin6_family = AF_INET6;
	sin6.sin6_addr = in6addr_loopback;
	if (bind(fd, (struct sockaddr *)&sin6, sizeof(sin6)) != 0) {
		close(fd);
		skip(); /* no IPv6 loopback on this host */
	}
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin6, &len), 0);
	uint16_t port = ntohs(sin6.sin6_port);
	for (int r = 0; r < 3; r++) {
		struct dist_config cfg = make_cfg(port, r, 3, 10000);
		snprintf(cfg.master_addr, sizeof(cfg.master_addr), "::1");
		pids[r] = spawn(&cfg, fd, run_body, &call);
	}
	close(fd);
	reap(pids, 3, codes, clock_now_ms() + 30000);
	for (int r = 0; r < 3; r++)
		assert_int_equal(codes[r], 0);
}

/* ---- dist_abort: cancels what is in flight, from another thread ---- */

struct abort_after {
	struct dist *d;
	int delay_ms;
	uint64_t at_ms; /* when dist_abort was called */
};

static void *abort_thread(void *arg)
{
	struct abort_after *a = arg;
	struct timespec ts = {a->delay_ms / 1000,
			      (long)(a->delay_ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
	a->at_ms = clock_now_ms();
	dist_abort(a->d);
	return NULL;
}

/* Rank 2 never joins the all-reduce, so ranks 0 and 1 block in it (the
 * group's timeout is 60 s). Rank 0 aborts from another thread: its
 * all-reduce returns DL_ECLOSED at once (whenever the abort came: before
 * the operation starts or during it), every later operation too, and the
 * peers' operations fail as well, since rank 0's sockets are gone. */
static int body_abort(struct dist *d, void *arg)
{
	size_t n = 1u << 20; /* a ring all-reduce */
	float *buf = calloc(n, sizeof(float));
	int rc, token = 0;
	(void)arg;
	if (buf == NULL)
		return 1;
	if (dist_rank(d) == 2) {
		/* never sent: this fails when rank 0 leaves */
		rc = dist_recv(d, &token, 1, DIST_INT32, 0);
		free(buf);
		return rc == DL_ECLOSED ? 0 : 2;
	}
	if (dist_rank(d) == 1) {
		rc = dist_all_reduce(d, buf, buf, n, DIST_FLOAT32, DIST_SUM);
		free(buf);
		return rc == DL_ECLOSED && !dist_aborted(d) ? 0 : 3;
	}
	struct abort_after a = {d, 200, 0};
	pthread_t th;
	if (pthread_create(&th, NULL, abort_thread, &a) != 0)
		return 4;
	rc = dist_all_reduce(d, buf, buf, n, DIST_FLOAT32, DIST_SUM);
	uint64_t returned = clock_now_ms();
	pthread_join(th, NULL);
	free(buf);
	if (rc != DL_ECLOSED || !dist_aborted(d))
		return 5;
	if (returned - a.at_ms > 2000) /* bounded: far below the timeout */
		return 6;
	dist_abort(d); /* idempotent */
	if (dist_barrier(d) != DL_ECLOSED)
		return 7;
	return 0;
}

/* a bootstrap no longer wanted is cancelled through cfg.cancel: rank 0
 * waiting for a peer that never comes, and a rank retrying a master that
 * is not there, both give up at once (the timeout is 60 s) */
struct raise_after {
	atomic_int *flag;
	uint64_t at_ms;
};

static void *raise_thread(void *arg)
{
	struct raise_after *a = arg;
	struct timespec ts = {0, 200000000L};

	nanosleep(&ts, NULL);
	a->at_ms = clock_now_ms();
	atomic_store(a->flag, 1);
	return NULL;
}

static void cancel_case(int rank, int listen_fd, uint16_t port)
{
	atomic_int flag = 0;
	struct raise_after a = {&flag, 0};
	struct dist_config cfg = make_cfg(port, rank, 2, 60000);
	struct dist *d = NULL;
	char err[512] = "";
	pthread_t th;

	cfg.cancel = &flag;
	assert_int_equal(pthread_create(&th, NULL, raise_thread, &a), 0);
	int rc = dist_init_listener(&cfg, listen_fd, &d, err, sizeof(err));
	uint64_t returned = clock_now_ms();
	pthread_join(th, NULL);
	assert_int_equal(rc, DL_ECLOSED);
	assert_null(d);
	assert_non_null(strstr(err, "cancelled"));
	assert_true(returned - a.at_ms < 1000);
}

static void test_init_cancel(void **state)
{
	uint16_t port;
	int lfd;

	(void)state;
	lfd = listen_loopback(&port);
	cancel_case(0, lfd, port); /* owns lfd */
	lfd = listen_loopback(&port);
	close(lfd); /* nothing listens there now */
	cancel_case(1, -1, port);
}

static void test_abort(void **state)
{
	(void)state;
	run_group(3, 60000, body_abort, NULL);
}

/* ---- the flight recorder and the hang hooks ---- */

/* run_recorded: a group with a recorder of 8 entries runs 9 collectives
 * of every kind (and point-to-point transfers, not recorded); the ring
 * holds the last 8, numbered 2 to 9 on every rank, all finished. */
static int run_recorded(const struct dist_config *cfg, int listen_fd, void *arg)
{
	static const enum dist_flight_op want[] = {
	    DIST_FLIGHT_BROADCAST,  DIST_FLIGHT_BARRIER,
	    DIST_FLIGHT_ALL_GATHER, DIST_FLIGHT_REDUCE,
	    DIST_FLIGHT_ALL_REDUCE, DIST_FLIGHT_ALL_REDUCE,
	    DIST_FLIGHT_ALL_REDUCE, DIST_FLIGHT_ALL_REDUCE};
	const size_t big = 20000; /* doubles: the ring algorithm */
	struct dist_config c = *cfg;
	struct dist_flight *f = dist_flight_new(8);
	struct dist_flight_entry e[8];
	struct dist_req *req[3];
	struct dist *d = NULL;
	double *x = calloc(big * MAX_WORLD, sizeof(double));
	char err[512];
	int w = cfg->world_size, r = cfg->rank;

	(void)arg;
	CHECK(f != NULL && x != NULL);
	c.flight = f;
	CHECK_RC(dist_init_listener(&c, listen_fd, &d, err, sizeof(err)));
	dist_flight_set_step(f, 11);
	CHECK_RC(dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM));
	CHECK_RC(dist_broadcast(d, x, 3, DIST_FLOAT64, w - 1));
	CHECK_RC(dist_barrier(d));
	CHECK_RC(dist_all_gather(d, x, x + big, 5, DIST_FLOAT64));
	CHECK_RC(dist_reduce(d, x, x + big, 6, DIST_FLOAT64, DIST_SUM, 0));
	if (r < 2) /* not recorded: the ranks would not agree on numbers */
		CHECK_RC(r == 0 ? dist_send(d, x, 2, DIST_FLOAT64, 1)
				: dist_recv(d, x, 2, DIST_FLOAT64, 0));
	for (int i = 0; i < 3; i++)
		CHECK_RC(dist_iall_reduce(d, x + i * 100, 7, DIST_FLOAT64,
					  DIST_SUM, &req[i]));
	for (int i = 2; i >= 0; i--)
		CHECK_RC(dist_wait(req[i]));
	CHECK_RC(dist_all_reduce(d, x, x, big, DIST_FLOAT64, DIST_SUM));
	CHECK(dist_flight_snapshot(f, e, 8) == 8);
	for (int i = 0; i < 8; i++) {
		CHECK(e[i].seq == (uint64_t)i + 2);
		CHECK(e[i].op == want[i]);
		CHECK(e[i].finished && e[i].done_ms >= e[i].t_ms);
		CHECK(e[i].step == 11);
	}
	CHECK(e[0].bytes == 3 * 8 && e[1].bytes == 0 && e[2].bytes == 5 * 8);
	CHECK(e[3].bytes == 6 * 8 && e[4].bytes == 7 * 8);
	CHECK(e[7].bytes == big * 8);
	CHECK(dist_flight_rank(f) == r);
	dist_free(d);
	/* a new group numbers from 1 again */
	dist_flight_begin_group(f, r);
	CHECK(dist_flight_snapshot(f, e, 8) == 0);
	dist_flight_free(f);
	free(x);
	return 0;
}

static void test_flight_recorded(void **state)
{
	(void)state;
	for (int w = 2; w <= 4; w++) {
		pid_t pids[4];
		int codes[4];
		uint16_t port;
		int lfd = listen_loopback(&port);
		for (int r = 0; r < w; r++) {
			struct dist_config cfg = make_cfg(port, r, w, 20000);
			pids[r] = spawn(&cfg, lfd, run_recorded, NULL);
		}
		close(lfd);
		reap(pids, w, codes, clock_now_ms() + GROUP_DEADLINE_MS);
		for (int r = 0; r < w; r++)
			assert_int_equal(codes[r], 0);
	}
}

struct hang_case {
	const char *kind; /* DLAUNCH_DIST_FAULT=2:kind for rank 1 */
	struct fail_shared *sh;
	struct dist_flight *f;
};

/* hang_watch: in the hung rank, a thread of its own reads the recorder
 * once rank 0 has given up, and ends the process (its main thread never
 * comes back): exit 0 when the hung all-reduce was never recorded */
static void *hang_watch(void *arg)
{
	struct hang_case *hc = arg;
	struct dist_flight_entry e[4];
	int ok = wait_shared(&hc->sh->done, 1, 30000);
	size_t n = dist_flight_snapshot(hc->f, e, 4);

	ok = ok && n == 1 && e[0].seq == 1 && e[0].finished;
	if (!ok)
		fprintf(stderr, "rank 1: %zu entries recorded, want 1\n", n);
	fflush(NULL);
	_exit(ok ? 0 : 1);
}

/* run_hang: rank 1 hangs before its second all-reduce; rank 0 times out
 * inside it, where its recorder shows it entered and not finished */
static int run_hang(const struct dist_config *cfg, int listen_fd, void *arg)
{
	struct hang_case *hc = arg;
	struct dist_config c = *cfg;
	struct dist_flight_entry e[4];
	struct dist *d = NULL;
	char err[512], fault[32];
	double x[4] = {0};
	pthread_t t;
	int rc;

	snprintf(fault, sizeof(fault), "2:%s", hc->kind);
	setenv("DLAUNCH_DIST_FAULT", fault, 1);
	setenv("DLAUNCH_DIST_FAULT_RANK", "1", 1);
	hc->f = dist_flight_new(4);
	CHECK(hc->f != NULL);
	c.flight = hc->f;
	CHECK_RC(dist_init_listener(&c, listen_fd, &d, err, sizeof(err)));
	CHECK_RC(dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM));
	if (cfg->rank == 1) {
		CHECK(pthread_create(&t, NULL, hang_watch, hc) == 0);
		dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM);
		fprintf(stderr, "rank 1: the hang (%s) returned\n", hc->kind);
		return 1;
	}
	rc = dist_all_reduce(d, x, x, 4, DIST_FLOAT64, DIST_SUM);
	CHECK(dist_flight_snapshot(hc->f, e, 4) == 2);
	__atomic_store_n(&hc->sh->done, 1, __ATOMIC_SEQ_CST);
	CHECK(rc == DL_ETIMEDOUT);
	CHECK(e[0].seq == 1 && e[0].finished);
	CHECK(e[1].seq == 2 && !e[1].finished);
	dist_free(d);
	dist_flight_free(hc->f);
	return 0;
}

static void test_hang_hooks(void **state)
{
	static const char *kinds[] = {"sleep", "loop", "read"};

	(void)state;
	for (size_t k = 0; k < 3; k++) {
		struct hang_case hc = {kinds[k], shared_new(), NULL};
		pid_t pids[2];
		int codes[2];
		uint16_t port;
		int lfd = listen_loopback(&port);
		for (int r = 0; r < 2; r++) {
			struct dist_config cfg = make_cfg(port, r, 2, 1000);
			pids[r] = spawn(&cfg, lfd, run_hang, &hc);
		}
		close(lfd);
		reap(pids, 2, codes, clock_now_ms() + 30000);
		if (codes[0] || codes[1])
			fprintf(stderr, "%s: exit codes %d %d\n", kinds[k],
				codes[0], codes[1]);
		assert_int_equal(codes[0], 0);
		assert_int_equal(codes[1], 0);
		munmap(hc.sh, sizeof(*hc.sh));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_all_reduce_matrix),
	    cmocka_unit_test(test_all_reduce_bits),
	    cmocka_unit_test(test_all_reduce_large),
	    cmocka_unit_test(test_broadcast),
	    cmocka_unit_test(test_reduce),
	    cmocka_unit_test(test_all_gather),
	    cmocka_unit_test(test_send_recv),
	    cmocka_unit_test(test_isend_irecv),
	    cmocka_unit_test(test_async),
	    cmocka_unit_test(test_abort),
	    cmocka_unit_test(test_init_cancel),
	    cmocka_unit_test(test_barrier),
	    cmocka_unit_test(test_config_from_env),
	    cmocka_unit_test(test_world_one_and_bad_args),
	    cmocka_unit_test(test_master_port_busy),
	    cmocka_unit_test(test_nccl_backend),
	    cmocka_unit_test(test_nccl_all_reduce),
	    cmocka_unit_test(test_nccl_broadcast),
	    cmocka_unit_test(test_nccl_reduce),
	    cmocka_unit_test(test_nccl_all_gather),
	    cmocka_unit_test(test_nccl_send_recv),
	    cmocka_unit_test(test_nccl_isend_irecv),
	    cmocka_unit_test(test_nccl_async),
	    cmocka_unit_test(test_nccl_barrier),
	    cmocka_unit_test(test_peer_dies),
	    cmocka_unit_test(test_peer_silent),
	    cmocka_unit_test(test_rank_never_arrives),
	    cmocka_unit_test(test_bootstrap_strangers),
	    cmocka_unit_test(test_master_starts_late),
	    cmocka_unit_test(test_larger_worlds),
	    cmocka_unit_test(test_free_with_pending),
	    cmocka_unit_test(test_bootstrap_bad_hellos),
	    cmocka_unit_test(test_ipv6),
	    cmocka_unit_test(test_flight_recorded),
	    cmocka_unit_test(test_hang_hooks),
	};
	log_init("test_dist");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
