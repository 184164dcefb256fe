/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_fix.c - the fixture the test_dist_* programs share (dist_fix.h):
 * the process harness (one forked process per rank on loopback, reaped
 * with a deadline), the data and its serial references, the buffers an
 * operation works on (host or device memory), and the shared memory the
 * failure cases coordinate through.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <math.h>
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

#include "dist_fix.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"

#ifdef DLAUNCH_HAVE_CUDA
#include <cuda_runtime.h> /* the NCCL cases' device buffers */
#endif

int test_rank = -1; /* in a child: its rank, for messages */
/* in a child on the NCCL backend: operations work on device memory */
int on_device;

/* ---- process harness ---- */

int listen_loopback(uint16_t *port)
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

struct dist_config make_cfg(uint16_t port, int rank, int world,
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

/* spawn: forks a child that runs fn and exits with its result. */
pid_t spawn(const struct dist_config *cfg, int listen_fd, rank_fn fn, void *arg)
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
void reap(pid_t *pids, int n, int *codes, uint64_t deadline_ms)
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

int run_body(const struct dist_config *cfg, int listen_fd, void *arg)
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
void run_group_on(enum dist_backend backend, int world, uint64_t timeout_ms,
		  body_fn body, void *arg)
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

void run_group(int world, uint64_t timeout_ms, body_fn body, void *arg)
{
	run_group_on(DIST_BACKEND_TCP, world, timeout_ms, body, arg);
}

/* tcp_worlds: runs body on the TCP backend at each world size from
 * min_world to 4 (nccl_worlds is its GPU counterpart) */
void tcp_worlds(int min_world, uint64_t timeout_ms, body_fn body, void *arg)
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

void fill_input(enum dist_dtype dtype, void *buf, size_t count, int rank,
		unsigned seed)
{
	for (size_t i = 0; i < count; i++)
		put_elem(dtype, buf, i, input_value(rank, i, seed));
}

/* large_count: a count of elements of es bytes that makes more than
 * 10 MiB and that no world size from 2 to 4 divides (odd, not a multiple
 * of 3); its byte size, an odd multiple of es, is then a multiple of no
 * segment, chunk or receive-ring size either. */
size_t large_count(size_t es)
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
int expected_ok(enum dist_dtype dtype, enum dist_op op, int world,
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
int check_reduced(const char *what, enum dist_dtype dtype, enum dist_op op,
		  int world, const void *got, size_t n, unsigned seed)
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
int check_input(const char *what, enum dist_dtype dtype, const void *got,
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

const enum dist_dtype all_dtypes[] = {DIST_FLOAT32, DIST_FLOAT64, DIST_INT32,
				      DIST_INT64, DIST_UINT8};
const enum dist_op all_ops[] = {DIST_SUM, DIST_AVG, DIST_MAX, DIST_MIN};
/* the dtype each op's large case uses: every dtype appears somewhere */
const enum dist_dtype large_dtypes[] = {DIST_FLOAT32, DIST_FLOAT64, DIST_INT32,
					DIST_UINT8};

/* ---- buffers ---- */

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
int tbuf_put(struct tbuf *b)
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
int tbuf_get(struct tbuf *b)
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
int tbuf_new(struct tbuf *b, size_t bytes)
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

void tbuf_free(struct tbuf *b)
{
#ifdef DLAUNCH_HAVE_CUDA
	if (on_device && b->op != NULL)
		cudaFree(b->op);
#endif
	free(b->host);
	b->host = b->op = NULL;
}

/* ---- failures across processes ---- */

struct fail_shared *shared_new(void)
{
	void *p = mmap(NULL, sizeof(struct fail_shared), PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED);
	memset(p, 0, sizeof(struct fail_shared));
	return p;
}

/* wait_shared: polls *flag (set by another process) until it reaches
 * value or the deadline passes; returns whether it did. */
int wait_shared(int *flag, int value, uint64_t timeout_ms)
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
