/* SPDX-License-Identifier: Apache-2.0 */
/*
 * test_nccl.c - the NCCL backend as dlaunch-train uses it, on GPUs:
 *  - ordered behind the compute stream (dist_set_stream with the GPU
 *    backend's stream, as train_ddp_new does): an all-reduce issued while
 *    that stream is still producing its input reduces the input, blocking
 *    (out of place) and asynchronous (in place, as the gradient buckets);
 *  - a peer that dies, or stalls, ends the survivor's collective within
 *    the group's timeout with an error that says the communicator was
 *    aborted, instead of a hang;
 *  - dist_abort from another thread cancels an all-reduce a peer never
 *    joins, and both ranks then form a new communicator and reduce on it
 *    (the in-place re-form of dlaunch-train, docs/worker-protocol.md);
 *    the abort and re-create times are printed.
 * One rank per GPU (world 1 needs one GPU, the peer cases two); every rank
 * is a forked child, since CUDA initialised in this process would not
 * survive a fork. Elsewhere each case is skipped with one line saying why.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../trainer/dist/dist.h"
#include "../../trainer/backend.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"

#ifdef DLAUNCH_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define MAX_WORLD     4
#define INIT_TIMEOUT  60000 /* ms: communicator set-up takes seconds */
#define PEER_TIMEOUT  3000  /* ms: the group's timeout in the peer cases */
#define CHILD_LIMIT_S 120   /* a child past this is killed (alarm) */

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "rank %d: %s:%d: %s\n", child_rank,    \
				__FILE__, __LINE__, #cond);                    \
			return 1;                                              \
		}                                                              \
	} while (0)

static int child_rank = -1;

typedef int (*rank_fn)(struct dist_config *cfg, int listen_fd, void *arg);

static int listen_loopback(uint16_t *port)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	memset(&sin, 0, sizeof(sin));
	assert_true(fd >= 0);
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	*port = ntohs(sin.sin_port);
	return fd;
}

/* run_ranks: world children run fn as ranks 0..world-1 of one group on
 * the NCCL backend (rank r on GPU r); codes[r] gets each exit status
 * (200 + signal when killed). A child still running once every other
 * has ended and `linger_ms` more have passed is killed: a stalled peer
 * is ended by the test, not left behind. */
static void run_ranks(int world, uint64_t timeout_ms, rank_fn fn, void *arg,
		      int *codes, uint64_t linger_ms)
{
	pid_t pids[MAX_WORLD];
	uint16_t port;
	int lfd = listen_loopback(&port), left = world;
	uint64_t first_end = 0;

	for (int r = 0; r < world; r++) {
		fflush(NULL);
		pids[r] = fork();
		assert_true(pids[r] >= 0);
		if (pids[r] == 0) {
			struct dist_config cfg;

			memset(&cfg, 0, sizeof(cfg));
			snprintf(cfg.master_addr, sizeof(cfg.master_addr),
				 "127.0.0.1");
			cfg.master_port = port;
			cfg.rank = r;
			cfg.world_size = world;
			cfg.backend = DIST_BACKEND_NCCL;
			cfg.cuda_device = r;
			cfg.timeout_ms = timeout_ms;
			child_rank = r;
			if (r != 0)
				close(lfd); /* rank 0's alone */
			alarm(CHILD_LIMIT_S);
			int code = fn(&cfg, r == 0 ? lfd : -1, arg);
			fflush(NULL);
			_exit(code);
		}
		codes[r] = -1;
	}
	close(lfd);
	while (left > 0) {
		for (int r = 0; r < world; r++) {
			int status;

			if (codes[r] != -1 ||
			    waitpid(pids[r], &status, WNOHANG) != pids[r])
				continue;
			codes[r] = WIFEXITED(status) ? WEXITSTATUS(status)
						     : 200 + WTERMSIG(status);
			left--;
			if (first_end == 0)
				first_end = clock_now_ms();
		}
		if (left > 0 && first_end &&
		    clock_now_ms() > first_end + linger_ms) {
			for (int r = 0; r < world; r++)
				if (codes[r] == -1)
					kill(pids[r], SIGKILL);
		}
		struct timespec ts = {0, 5000000};
		nanosleep(&ts, NULL);
	}
}

#ifdef DLAUNCH_HAVE_CUDA
static int count_gpus(struct dist_config *cfg, int listen_fd, void *arg)
{
	(void)cfg;
	(void)arg;
	if (listen_fd >= 0)
		close(listen_fd);
	int n = train_backend_cuda_available();
	return n < 100 ? n : 100;
}
#endif

/* gpus: the CUDA devices a child sees (0 without CUDA), asked once */
static int gpus(void)
{
	static int n = -1;

#ifdef DLAUNCH_HAVE_CUDA
	if (n < 0) {
		int code;

		run_ranks(1, 1000, count_gpus, NULL, &code, 0);
		n = code >= 0 && code < 100 ? code : 0;
	}
#endif
	return n < 0 ? 0 : n;
}

/* need_gpus: skips the case, with the reason, below `want` GPUs */
static void need_gpus(const char *test, int want)
{
	int have = gpus();

	if (have >= want)
		return;
#ifdef DLAUNCH_HAVE_CUDA
	printf("skip - %s: needs %d CUDA device(s), %d visible\n", test, want,
	       have);
#else
	printf("skip - %s: a build without CUDA (no NCCL backend)\n", test);
#endif
	skip();
}

#ifdef DLAUNCH_HAVE_CUDA
/* stall_stream: a host function on the stream that holds it ~300 ms, so
 * that the copy queued behind it lands well after the host has issued
 * the collective: an all-reduce not ordered behind the stream would
 * reduce the buffer's old contents */
static void CUDART_CB stall_stream(void *arg)
{
	struct timespec ts = {0, 300000000};

	(void)arg;
	nanosleep(&ts, NULL);
}

/* late_fill: queues on the compute stream a stall, then dev = value */
static int late_fill(struct train_backend *be, float *dev, float *pinned,
		     size_t n, float value)
{
	cudaStream_t s = (cudaStream_t)be->stream(be->ctx);

	for (size_t i = 0; i < n; i++)
		pinned[i] = value;
	if (cudaLaunchHostFunc(s, stall_stream, NULL) != cudaSuccess ||
	    cudaMemcpyAsync(dev, pinned, n * sizeof(float),
			    cudaMemcpyHostToDevice, s) != cudaSuccess)
		return -1;
	return 0;
}

/* all_equal: every element of dev (read through the backend) is want */
static int all_equal(struct train_backend *be, const float *dev, float *host,
		     size_t n, float want)
{
	if (be->download(be->ctx, host, dev, n * sizeof(float)) != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (host[i] != want) {
			fprintf(stderr, "rank %d: [%zu] = %g, want %g\n",
				child_rank, i, (double)host[i], (double)want);
			return 0;
		}
	return 1;
}
#endif

static int rank_ordered(struct dist_config *cfg, int listen_fd, void *arg)
{
	(void)arg;
#ifdef DLAUNCH_HAVE_CUDA
	const size_t n = 1 << 20;
	struct train_backend be;
	struct dist *d = NULL;
	char err[512];
	float *send, *recv, *pinned, *host;
	float want = (float)(cfg->world_size * (cfg->world_size + 1) / 2);
	struct dist_req *req = NULL;

	/* the trainer's order: the device's backend, then the group */
	CHECK(train_backend_cuda(&be, cfg->cuda_device, err, sizeof(err)) == 0);
	if (dist_init_listener(cfg, listen_fd, &d, err, sizeof(err)) != 0) {
		fprintf(stderr, "rank %d: dist_init: %s\n", cfg->rank, err);
		return 1;
	}
	dist_set_stream(d, be.stream(be.ctx));
	send = be.alloc(be.ctx, n * sizeof(float));
	recv = be.alloc(be.ctx, n * sizeof(float));
	host = malloc(n * sizeof(float));
	CHECK(send && recv && host);
	CHECK(cudaMallocHost((void **)&pinned, n * sizeof(float)) ==
	      cudaSuccess);
	CHECK(be.sync(be.ctx) == 0); /* the buffers are zero */

	/* blocking, out of place: recv = sum of every rank's late send */
	CHECK(late_fill(&be, send, pinned, n, (float)(cfg->rank + 1)) == 0);
	CHECK(dist_all_reduce(d, send, recv, n, DIST_FLOAT32, DIST_SUM) == 0);
	CHECK(all_equal(&be, recv, host, n, want));

	/* asynchronous, in place, as a gradient bucket */
	CHECK(late_fill(&be, recv, pinned, n, (float)(cfg->rank + 1)) == 0);
	CHECK(dist_iall_reduce(d, recv, n, DIST_FLOAT32, DIST_SUM, &req) == 0);
	CHECK(dist_wait(req) == 0);
	CHECK(all_equal(&be, recv, host, n, want));

	cudaFreeHost(pinned);
	free(host);
	be.release(be.ctx, send);
	be.release(be.ctx, recv);
	dist_free(d);
	train_backend_release(&be);
	return 0;
#else
	(void)cfg;
	(void)listen_fd;
	return 1;
#endif
}

static void test_nccl_ordered_behind_compute(void **state)
{
	int codes[MAX_WORLD];

	(void)state;
	need_gpus("test_nccl_ordered_behind_compute", 1);
	for (int w = 1; w <= gpus() && w <= MAX_WORLD; w++) {
		run_ranks(w, INIT_TIMEOUT, rank_ordered, NULL, codes, 60000);
		for (int r = 0; r < w; r++)
			assert_int_equal(codes[r], 0);
	}
}

enum peer_fault { PEER_DIES, PEER_STALLS };

/* rank_peer: one good all-reduce, then rank 1 dies or stalls while rank
 * 0 issues another; rank 0 must get an error within the timeout (plus
 * slack for the abort) with "communicator aborted" in its log, and free
 * the group in bounded time. Exit 0 on rank 0 means all of that held. */
static int rank_peer(struct dist_config *cfg, int listen_fd, void *arg)
{
#ifdef DLAUNCH_HAVE_CUDA
	enum peer_fault fault = *(enum peer_fault *)arg;
	struct dist *d = NULL;
	char err[512], log[4096];
	float *buf;
	FILE *f;
	uint64_t t0, spent;
	int rc;
	size_t got;

	if (dist_init_listener(cfg, listen_fd, &d, err, sizeof(err)) != 0) {
		fprintf(stderr, "rank %d: dist_init: %s\n", cfg->rank, err);
		return 1;
	}
	CHECK(cudaMalloc((void **)&buf, 1024 * sizeof(float)) == cudaSuccess);
	CHECK(cudaMemset(buf, 0, 1024 * sizeof(float)) == cudaSuccess);
	CHECK(cudaDeviceSynchronize() == cudaSuccess);
	CHECK(dist_all_reduce(d, buf, buf, 1024, DIST_FLOAT32, DIST_SUM) == 0);
	if (cfg->rank == 1) {
		if (fault == PEER_DIES)
			_exit(0); /* no goodbye: the process is gone */
		for (;;)
			pause(); /* alive, never joining: killed by the test */
	}
	/* rank 0: catch the log line */
	f = tmpfile();
	CHECK(f != NULL);
	fflush(stderr);
	int saved = dup(2);
	CHECK(saved >= 0 && dup2(fileno(f), 2) == 2);
	t0 = clock_now_ms();
	rc = dist_all_reduce(d, buf, buf, 1024, DIST_FLOAT32, DIST_SUM);
	spent = clock_now_ms() - t0;
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	rewind(f);
	got = fread(log, 1, sizeof(log) - 1, f);
	log[got] = '\0';
	fclose(f);
	fprintf(stderr,
		"rank 0: all-reduce after the peer %s: %s in %llu ms; "
		"logged: %s",
		fault == PEER_DIES ? "died" : "stalled", dl_strerror(rc),
		(unsigned long long)spent, log);
	CHECK(rc == DL_ETIMEDOUT || rc == DL_ECLOSED || rc == DL_EIO);
	CHECK(spent <= PEER_TIMEOUT + 10000);
	CHECK(strstr(log, "communicator aborted") != NULL);
	/* the group stays failed, and freeing it does not wait for the peer */
	CHECK(dist_all_reduce(d, buf, buf, 1024, DIST_FLOAT32, DIST_SUM) != 0);
	t0 = clock_now_ms();
	dist_free(d);
	CHECK(clock_now_ms() - t0 <= PEER_TIMEOUT + 10000);
	return 0;
#else
	(void)cfg;
	(void)listen_fd;
	(void)arg;
	return 1;
#endif
}

static void peer_case(const char *test, enum peer_fault fault)
{
	int codes[2];

	need_gpus(test, 2);
	/* a stalled peer is killed as soon as rank 0 is done; a dead one
	 * is gone first, and rank 0 gets time to notice */
	run_ranks(2, PEER_TIMEOUT, rank_peer, &fault, codes,
		  fault == PEER_STALLS ? 0 : PEER_TIMEOUT + 20000);
	assert_int_equal(codes[0], 0);
	if (fault == PEER_DIES)
		assert_int_equal(codes[1], 0);
	else
		assert_int_equal(codes[1], 200 + SIGKILL);
}

static void test_nccl_peer_dies(void **state)
{
	(void)state;
	peer_case("test_nccl_peer_dies", PEER_DIES);
}

static void test_nccl_peer_stalls(void **state)
{
	(void)state;
	peer_case("test_nccl_peer_stalls", PEER_STALLS);
}

/* The abort-and-re-create case: a second listening socket made before
 * the fork, so that both children know the new group's port. */
struct recreate {
	int lfd2;
	uint16_t port2;
};

#ifdef DLAUNCH_HAVE_CUDA
struct aborter {
	struct dist *d;
	uint64_t delay_ms;
};

static void *abort_later(void *arg)
{
	struct aborter *a = arg;
	struct timespec ts = {(time_t)(a->delay_ms / 1000),
			      (long)(a->delay_ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
	dist_abort(a->d);
	return NULL;
}
#endif

/* rank_recreate: one good all-reduce; rank 0 then issues another that
 * rank 1 never joins, and a thread of rank 0 aborts the group 200 ms
 * later: the call must fail at once (well before the group's timeout).
 * Rank 1 aborts its own group. Both form a new group on the second port
 * and all-reduce on it correctly. */
static int rank_recreate(struct dist_config *cfg, int listen_fd, void *arg)
{
#ifdef DLAUNCH_HAVE_CUDA
	struct recreate *rc2 = arg;
	struct dist *d = NULL;
	struct aborter ab;
	pthread_t th;
	char err[512];
	float *buf, host[1024];
	uint64_t t0, abort_ms, recreate_ms;
	int rc;

	if (cfg->rank != 0)
		close(rc2->lfd2); /* rank 0's alone */
	if (dist_init_listener(cfg, listen_fd, &d, err, sizeof(err)) != 0) {
		fprintf(stderr, "rank %d: dist_init: %s\n", cfg->rank, err);
		return 1;
	}
	CHECK(cudaMalloc((void **)&buf, 1024 * sizeof(float)) == cudaSuccess);
	CHECK(cudaMemset(buf, 0, 1024 * sizeof(float)) == cudaSuccess);
	CHECK(cudaDeviceSynchronize() == cudaSuccess);
	CHECK(dist_all_reduce(d, buf, buf, 1024, DIST_FLOAT32, DIST_SUM) == 0);
	if (cfg->rank == 0) {
		ab.d = d;
		ab.delay_ms = 200;
		CHECK(pthread_create(&th, NULL, abort_later, &ab) == 0);
		t0 = clock_now_ms();
		rc = dist_all_reduce(d, buf, buf, 1024, DIST_FLOAT32, DIST_SUM);
		abort_ms = clock_now_ms() - t0;
		pthread_join(th, NULL);
		CHECK(rc == DL_ECLOSED);
		/* cancelled by the abort, not by the group's timeout */
		CHECK(abort_ms < PEER_TIMEOUT);
		fprintf(stderr,
			"rank 0: all-reduce cancelled %llu ms after "
			"it started (abort at 200 ms)\n",
			(unsigned long long)abort_ms);
	} else {
		struct timespec ts = {0, 500000000};

		nanosleep(&ts, NULL); /* rank 0 waits in vain meanwhile */
		dist_abort(d);
	}
	t0 = clock_now_ms();
	dist_free(d);
	d = NULL;
	cfg->master_port = rc2->port2;
	if (dist_init_listener(cfg, cfg->rank == 0 ? rc2->lfd2 : -1, &d, err,
			       sizeof(err)) != 0) {
		fprintf(stderr, "rank %d: new group: %s\n", cfg->rank, err);
		return 1;
	}
	recreate_ms = clock_now_ms() - t0;
	for (int i = 0; i < 1024; i++)
		host[i] = (float)(cfg->rank + 1);
	CHECK(cudaMemcpy(buf, host, sizeof(host), cudaMemcpyHostToDevice) ==
	      cudaSuccess);
	CHECK(dist_all_reduce(d, buf, buf, 1024, DIST_FLOAT32, DIST_SUM) == 0);
	CHECK(cudaMemcpy(host, buf, sizeof(host), cudaMemcpyDeviceToHost) ==
	      cudaSuccess);
	for (int i = 0; i < 1024; i++)
		CHECK(host[i] == 3.0f);
	fprintf(stderr, "rank %d: free and new communicator in %llu ms\n",
		cfg->rank, (unsigned long long)recreate_ms);
	dist_free(d);
	cudaFree(buf);
	return 0;
#else
	(void)cfg;
	(void)listen_fd;
	(void)arg;
	return 1;
#endif
}

static void test_nccl_abort_recreate(void **state)
{
	struct recreate rc2;
	int codes[2];

	(void)state;
	need_gpus("test_nccl_abort_recreate", 2);
	rc2.lfd2 = listen_loopback(&rc2.port2);
	run_ranks(2, PEER_TIMEOUT, rank_recreate, &rc2, codes, 30000);
	close(rc2.lfd2);
	assert_int_equal(codes[0], 0);
	assert_int_equal(codes[1], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nccl_ordered_behind_compute),
	    cmocka_unit_test(test_nccl_peer_dies),
	    cmocka_unit_test(test_nccl_peer_stalls),
	    cmocka_unit_test(test_nccl_abort_recreate),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
