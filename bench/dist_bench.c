/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dist_bench.c - all-reduce latency and bus bandwidth of dlaunch's
 * collective library (TCP backend), the counterpart of bench/gloo_bench.py.
 *
 *   MASTER_ADDR=127.0.0.1 MASTER_PORT=P RANK=r WORLD_SIZE=n \
 *       dist_bench [--sizes 4,1024,1048576] [--max-bytes-moved 268435456]
 *                  [--device cpu|cuda] [--init-only]
 *   dist_bench --device-count
 *   dist_bench --flight-cost
 *   ... dist_bench --flight-compare [--sizes ...] [--max-bytes-moved B]
 *
 * Every rank runs the same sizes (bytes of float32, in place, sum). Per
 * size: warm-up iterations, a barrier, then a timed loop; the time of a
 * size is the slowest rank's (all-reduce MAX of the elapsed seconds), so a
 * rank that finished early does not flatter the result. The iteration
 * count is the same formula as gloo_bench.py: enough iterations to move
 * about --max-bytes-moved bytes, between 5 and 1000.
 *
 * Rank 0 prints one JSON object per size on stdout:
 *   {"impl": "dlaunch-tcp", "world": 4, "bytes": 1024, "iters": 1000,
 *    "latency_us": 57.1, "busbw_gbps": 0.03}
 * busbw_gbps is 2(n-1)/n * bytes / time, in GB/s (1e9 bytes).
 *
 * --device cuda (CUDA builds only) uses the NCCL backend on a device buffer
 * of the GPU dlaunch-train would use (trainer/device.c: GPU LOCAL_RANK,
 * one per rank of the node). Host-to-device copies are followed by a
 * device synchronisation before NCCL, which runs on its own non-blocking
 * stream, touches the buffer. --device-count prints {"cuda_devices": n,
 * "names": [...]}, the devices the CUDA runtime sees (CUDA_VISIBLE_DEVICES
 * applies; 0 in a build without CUDA), and exits. Every run first prints
 * {"impl": ..., "world": n, "init_ms": t}: the time from dist_init to the end
 * of the first one-element all-reduce (forming the group and, for NCCL,
 * creating the communicator, as PyTorch does lazily at its first collective);
 * --init-only stops there.
 *
 * Collectives are recorded in a flight recorder as in dlaunch-train
 * (trainer/dist_flight.h): DLAUNCH_FLIGHT_ENTRIES sets its size (default
 * 64; 0 records nothing), and the first line says it ("flight_entries");
 * bench.py flight runs both side by side. --flight-cost measures the
 * recorder alone, without a group: {"flight_ns_per_collective": t}, the
 * time of one collective's enter and finish in a 64-entry ring on one
 * thread, over 10 million of them. --flight-compare (TCP) forms two
 * groups in each process, one recording into a 64-entry recorder and one
 * not (its bootstrap on a port rank 0 picks and broadcasts over the
 * first), and per size alternates blocks
 * of all-reduces between them (A B B A ...), so that a change in the
 * machine's load hits both alike, each group's time being the median of
 * its blocks' (a block the scheduler stalled does not count); rank 0
 * prints per size
 *   {"bytes": 4, "iters": 1000, "on_us": 61.2, "off_us": 60.9,
 *    "off_over_on": 0.995}
 * (each the slowest rank's time per all-reduce).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../trainer/dist/dist.h"
#include "../trainer/dist/dist_flight.h"
#include "../trainer/options.h"
#include "../trainer/device.h"
#include "dlaunch/clock.h"
#include "dlaunch/error.h"
#include "dlaunch/parse.h"

#ifdef DLAUNCH_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#define BENCH_MAX_SIZES 64

/* flight_cost: --flight-cost (see above) */
static int flight_cost(void)
{
	const uint64_t n = 10000000;
	struct dist_flight *f = dist_flight_new(DIST_FLIGHT_DEFAULT_ENTRIES);
	uint64_t t0;

	if (f == NULL)
		return 1;
	dist_flight_begin_group(f, 0);
	t0 = clock_now_ns();
	for (uint64_t i = 0; i < n; i++)
		dist_flight_finish(
		    f, dist_flight_enter(f, DIST_FLIGHT_ALL_REDUCE, 4));
	printf("{\"flight_ns_per_collective\": %.1f, \"entries\": %d, "
	       "\"iters\": %llu}\n",
	       (double)(clock_now_ns() - t0) / (double)n,
	       DIST_FLIGHT_DEFAULT_ENTRIES, (unsigned long long)n);
	dist_flight_free(f);
	return 0;
}

#define COMPARE_BLOCKS 40

static int bench_iters(uint64_t bytes, uint64_t max_bytes_moved);

/* cmp_double: qsort order of doubles */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* compare_size: one size of --flight-compare on the groups g[0]
 * (recorded) and g[1] (not); per all-reduce, the median over each
 * group's blocks (robust to a block the scheduler stalled), in per[2] */
static int compare_size(struct dist **g, float *buf, size_t count, int iters,
			double per[2])
{
	int block = iters / COMPARE_BLOCKS > 0 ? iters / COMPARE_BLOCKS : 1;
	double t[2][COMPARE_BLOCKS / 2];
	int n[2] = {0, 0}, rc = 0;

	for (int w = 0; w < 2 && rc == 0; w++)
		for (int i = 0; i < 3 && rc == 0; i++)
			rc = dist_all_reduce(g[w], buf, buf, count,
					     DIST_FLOAT32, DIST_SUM);
	for (int b = 0; b < COMPARE_BLOCKS && rc == 0; b++) {
		int w = (b % 4 == 0 || b % 4 == 3) ? 0 : 1; /* A B B A */
		uint64_t t0;

		rc = dist_barrier(g[w]);
		t0 = clock_now_ns();
		for (int i = 0; i < block && rc == 0; i++)
			rc = dist_all_reduce(g[w], buf, buf, count,
					     DIST_FLOAT32, DIST_SUM);
		t[w][n[w]++] = (double)(clock_now_ns() - t0) / 1e9 / block;
	}
	for (int w = 0; w < 2; w++) {
		qsort(t[w], (size_t)n[w], sizeof(double), cmp_double);
		per[w] = n[w] ? t[w][n[w] / 2] : 0;
	}
	/* the slowest rank's */
	if (rc == 0)
		rc = dist_all_reduce(g[1], per, per, 2, DIST_FLOAT64, DIST_MAX);
	return rc;
}

/* listen_any: a listening TCP socket on a port the kernel picks (all
 * addresses), its port in *port; -1 on failure */
static int listen_any(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(fd, 64) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* second_group: the group without a recorder, bootstrapped on a port
 * rank 0 takes from the kernel and tells the others over the first */
static int second_group(struct dist_config cfg, struct dist *first,
			struct dist **out, char *err, size_t err_size)
{
	int32_t port = 0;
	uint16_t p16 = 0;
	int fd = -1, rc;

	if (cfg.world_size > 1 && cfg.rank == 0) {
		fd = listen_any(&p16);
		port = fd < 0 ? -1 : p16;
	}
	rc = cfg.world_size > 1 ? dist_broadcast(first, &port, 1, DIST_INT32, 0)
				: 0;
	if (rc == 0 && port < 0)
		rc = DL_ESYS;
	if (rc != 0) {
		snprintf(err, err_size, "no port for the second group");
		if (fd >= 0)
			close(fd);
		return rc;
	}
	cfg.flight = NULL;
	cfg.master_port = (uint16_t)port;
	return dist_init_listener(&cfg, fd, out, err, err_size);
}

/* flight_compare: --flight-compare (see above) */
static int flight_compare(struct dist_config cfg, const uint64_t *sizes,
			  int nsizes, uint64_t max_moved)
{
	struct dist_flight *f = dist_flight_new(DIST_FLIGHT_DEFAULT_ENTRIES);
	struct dist *g[2] = {NULL, NULL};
	uint64_t max_size = 0;
	float *buf = NULL;
	char err[256] = "out of memory";
	int rc = f ? 0 : DL_ENOMEM;

	cfg.timeout_ms = 120000;
	cfg.flight = f;
	if (rc == 0)
		rc = dist_init(&cfg, &g[0], err, sizeof(err));
	if (rc == 0)
		rc = second_group(cfg, g[0], &g[1], err, sizeof(err));
	for (int s = 0; s < nsizes; s++)
		if (sizes[s] > max_size)
			max_size = sizes[s];
	if (rc == 0 && (buf = calloc(1, max_size)) == NULL)
		rc = DL_ENOMEM;
	if (rc != 0)
		fprintf(stderr, "dist_bench: --flight-compare: %s\n", err);
	for (int s = 0; s < nsizes && rc == 0; s++) {
		int iters = bench_iters(sizes[s], max_moved);
		double per[2];

		rc = compare_size(g, buf, sizes[s] / 4, iters, per);
		if (rc == 0 && cfg.rank == 0) {
			printf("{\"bytes\": %llu, \"iters\": %d, \"on_us\": "
			       "%.3f, \"off_us\": %.3f, \"off_over_on\": "
			       "%.4f}\n",
			       (unsigned long long)sizes[s], iters,
			       per[0] * 1e6, per[1] * 1e6, per[1] / per[0]);
			fflush(stdout);
		}
	}
	free(buf);
	dist_free(g[0]);
	dist_free(g[1]);
	dist_flight_free(f);
	return rc == 0 ? 0 : 1;
}

static int bench_iters(uint64_t bytes, uint64_t max_bytes_moved)
{
	uint64_t it = max_bytes_moved / (bytes ? bytes : 1);
	if (it < 5)
		it = 5;
	if (it > 1000)
		it = 1000;
	return (int)it;
}

/* visible_gpus: the CUDA devices this process sees (0 without CUDA) */
static int visible_gpus(void)
{
	int n = 0;
#ifdef DLAUNCH_HAVE_CUDA
	if (cudaGetDeviceCount(&n) != cudaSuccess)
		n = 0;
#endif
	return n;
}

/* print_devices: {"cuda_devices": n, "names": [...]} for --device-count */
static int print_devices(void)
{
	int n = visible_gpus();

	printf("{\"cuda_devices\": %d, \"names\": [", n);
	for (int i = 0; i < n; i++) {
		const char *name = "?";
#ifdef DLAUNCH_HAVE_CUDA
		struct cudaDeviceProp prop;

		if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
			prop.name[sizeof(prop.name) - 1] = '\0';
			for (char *c = prop.name; *c; c++)
				if (*c == '"' || *c == '\\' ||
				    (unsigned char)*c < 0x20)
					*c = '?';
			name = prop.name;
		}
#endif
		printf("%s\"%s\"", i ? ", " : "", name);
	}
	printf("]}\n");
	return 0;
}

#ifdef DLAUNCH_HAVE_CUDA
/* to_device: dst (device) = src (host), landed before NCCL's stream,
 * which does not wait for the legacy default stream, can read it */
static int to_device(void *dst, const void *src, size_t bytes)
{
	if (cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) !=
		cudaSuccess ||
	    cudaDeviceSynchronize() != cudaSuccess)
		return DL_EIO;
	return 0;
}
#endif

/* pick_gpu: cfg->cuda_device as dlaunch-train chooses it */
static int pick_gpu(struct dist_config *cfg)
{
	struct train_device_request rq = {.device = DEVICE_CUDA,
					  .backend = BACKEND_NCCL};
	struct train_device_choice ch;
	const char *lws = getenv("LOCAL_WORLD_SIZE");
	char err[512];
	uint64_t v;

	rq.local_rank = cfg->cuda_device; /* LOCAL_RANK */
	rq.local_world = rq.local_rank + 1;
	if (lws && *lws) {
		if (parse_u64(lws, 1, 65536, &v) != 0) {
			fprintf(stderr,
				"dist_bench: LOCAL_WORLD_SIZE='%s' is not a "
				"number in 1..65536\n",
				lws);
			return DL_EINVAL;
		}
		rq.local_world = (int)v;
	}
	rq.visible_gpus = visible_gpus();
	if (train_device_choose(&rq, &ch, err, sizeof(err)) != 0) {
		fprintf(stderr, "dist_bench: %s\n", err);
		return DL_ENOTSUP;
	}
	cfg->cuda_device = ch.gpu;
	return 0;
}

static int parse_sizes(const char *s, uint64_t *sizes, int *n)
{
	char tmp[1024];
	if (strlen(s) >= sizeof(tmp))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s", s);
	*n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(tmp, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		if (*n >= BENCH_MAX_SIZES)
			return -1;
		uint64_t v;
		if (parse_size_bytes(tok, 4, 1ull << 32, &v) != 0 || v % 4 != 0)
			return -1;
		sizes[(*n)++] = v;
	}
	return *n > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
	uint64_t sizes[BENCH_MAX_SIZES];
	int nsizes = 0;
	uint64_t max_moved = 256ull << 20;
	int use_cuda = 0, init_only = 0, count_only = 0, cost_only = 0;
	int compare = 0;
	parse_sizes("4,64,1024,16384,262144,1048576,4194304,16777216", sizes,
		    &nsizes);
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
			if (parse_sizes(argv[++i], sizes, &nsizes) != 0) {
				fprintf(stderr,
					"dist_bench: bad --sizes '%s' (byte "
					"counts, multiples of 4, comma "
					"separated)\n",
					argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--max-bytes-moved") == 0 &&
			   i + 1 < argc) {
			if (parse_size_bytes(argv[++i], 1, 1ull << 40,
					     &max_moved) != 0) {
				fprintf(stderr,
					"dist_bench: bad --max-bytes-moved "
					"'%s'\n",
					argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
			i++;
			if (strcmp(argv[i], "cuda") == 0) {
				use_cuda = 1;
			} else if (strcmp(argv[i], "cpu") != 0) {
				fprintf(stderr,
					"dist_bench: bad --device '%s' (cpu "
					"or cuda)\n",
					argv[i]);
				return 2;
			}
		} else if (strcmp(argv[i], "--init-only") == 0) {
			init_only = 1;
		} else if (strcmp(argv[i], "--device-count") == 0) {
			count_only = 1;
		} else if (strcmp(argv[i], "--flight-cost") == 0) {
			cost_only = 1;
		} else if (strcmp(argv[i], "--flight-compare") == 0) {
			compare = 1;
		} else {
			fprintf(stderr,
				"usage: dist_bench [--sizes B,B,...] "
				"[--max-bytes-moved B] [--device cpu|cuda] "
				"[--init-only] | --device-count | "
				"--flight-cost | --flight-compare (env: "
				"MASTER_ADDR MASTER_PORT RANK WORLD_SIZE "
				"LOCAL_RANK LOCAL_WORLD_SIZE)\n");
			return 2;
		}
	}
	if (count_only)
		return print_devices();
	if (cost_only)
		return flight_cost();

	struct dist_config cfg;
	char err[256];
	struct dist *d = NULL;
#ifndef DLAUNCH_HAVE_CUDA
	if (use_cuda) {
		fprintf(stderr, "dist_bench: --device cuda: this build has no "
				"CUDA (nvcc was not found)\n");
		return 2;
	}
#endif
	const char *impl = use_cuda ? "dlaunch-nccl" : "dlaunch-tcp";
	struct dist_flight *flight = NULL;
	int rc = dist_flight_from_env(&flight, err, sizeof(err));
	if (rc == 0)
		rc = dist_config_from_env(&cfg, err, sizeof(err));
	uint64_t t_init = clock_now_ns();
	if (rc == 0 && use_cuda && pick_gpu(&cfg) != 0)
		return 1;
	if (rc == 0 && compare && !use_cuda) {
		dist_flight_free(flight);
		return flight_compare(cfg, sizes, nsizes, max_moved);
	}
	if (rc == 0) {
		cfg.timeout_ms = 120000;
		cfg.backend = use_cuda ? DIST_BACKEND_NCCL : DIST_BACKEND_TCP;
		cfg.flight = flight;
		rc = dist_init(&cfg, &d, err, sizeof(err));
	}
	if (rc != 0) {
		fprintf(stderr, "dist_bench: cannot form the group: %s\n", err);
		dist_flight_free(flight);
		return 1;
	}
	int rank = dist_rank(d), world = dist_world_size(d);

	/* init_ms: forming the group plus the first (one-element)
	 * all-reduce, which is when PyTorch creates its NCCL communicator;
	 * taken before the benchmark's buffers are set up */
	{
		float one = 1.0f, *small = &one;
#ifdef DLAUNCH_HAVE_CUDA
		if (use_cuda &&
		    (cudaMalloc((void **)&small, sizeof(one)) != cudaSuccess ||
		     to_device(small, &one, sizeof(one)) != 0))
			rc = DL_EIO;
#endif
		if (rc == 0)
			rc = dist_all_reduce(d, small, small, 1, DIST_FLOAT32,
					     DIST_SUM);
#ifdef DLAUNCH_HAVE_CUDA
		if (rc == 0 && use_cuda &&
		    cudaDeviceSynchronize() != cudaSuccess)
			rc = DL_EIO;
		if (use_cuda && small != &one)
			cudaFree(small);
#endif
	}
	double init_ms = (double)(clock_now_ns() - t_init) / 1e6;
	if (rc != 0) {
		fprintf(stderr, "dist_bench: rank %d: first all-reduce: %s\n",
			rank, dl_strerror(rc));
		dist_free(d);
		dist_flight_free(flight);
		return 1;
	}
	if (rank == 0) {
		printf("{\"impl\": \"%s\", \"world\": %d, \"init_ms\": "
		       "%.3f, \"flight_entries\": %zu}\n",
		       impl, world, init_ms, dist_flight_entries(flight));
		fflush(stdout);
	}
	if (init_only) {
		dist_free(d);
		dist_flight_free(flight);
		return 0;
	}
	uint64_t max_size = 0;
	for (int i = 0; i < nsizes; i++)
		if (sizes[i] > max_size)
			max_size = sizes[i];
	float *host = malloc(max_size), *buf = host;
	if (host == NULL) {
		fprintf(stderr, "dist_bench: cannot allocate %llu bytes\n",
			(unsigned long long)max_size);
		dist_free(d);
		dist_flight_free(flight);
		return 1;
	}
	for (uint64_t k = 0; k < max_size / 4; k++)
		host[k] = (float)((k + (uint64_t)rank) % 7) * 0.25f;
#ifdef DLAUNCH_HAVE_CUDA
	if (use_cuda) {
		void *dev = NULL;
		if (cudaMalloc(&dev, max_size) != cudaSuccess ||
		    to_device(dev, host, max_size) != 0) {
			fprintf(stderr,
				"dist_bench: cannot set up %llu bytes "
				"on the GPU\n",
				(unsigned long long)max_size);
			free(host);
			dist_free(d);
			dist_flight_free(flight);
			return 1;
		}
		buf = dev;
	}
#endif

	for (int s = 0; s < nsizes && rc == 0; s++) {
		size_t count = sizes[s] / 4;
		int iters = bench_iters(sizes[s], max_moved);
		int warm =
		    iters / 10 < 2 ? 2 : (iters / 10 > 20 ? 20 : iters / 10);
		for (int i = 0; i < warm && rc == 0; i++)
			rc = dist_all_reduce(d, buf, buf, count, DIST_FLOAT32,
					     DIST_SUM);
		if (rc == 0)
			rc = dist_barrier(d);
		uint64_t t0 = clock_now_ns();
		for (int i = 0; i < iters && rc == 0; i++)
			rc = dist_all_reduce(d, buf, buf, count, DIST_FLOAT32,
					     DIST_SUM);
#ifdef DLAUNCH_HAVE_CUDA
		if (use_cuda && cudaDeviceSynchronize() != cudaSuccess)
			rc = DL_EIO;
#endif
		double secs = (double)(clock_now_ns() - t0) / 1e9;
		/* the slowest rank's time counts; NCCL reduces device memory
		 * only, so the number travels through the GPU there */
		if (rc == 0 && !use_cuda)
			rc = dist_all_reduce(d, &secs, &secs, 1, DIST_FLOAT64,
					     DIST_MAX);
#ifdef DLAUNCH_HAVE_CUDA
		if (rc == 0 && use_cuda) {
			double *dsecs = NULL;
			if (cudaMalloc((void **)&dsecs, sizeof(secs)) !=
				cudaSuccess ||
			    to_device(dsecs, &secs, sizeof(secs)) != 0)
				rc = DL_EIO;
			if (rc == 0)
				rc = dist_all_reduce(d, dsecs, dsecs, 1,
						     DIST_FLOAT64, DIST_MAX);
			if (rc == 0 &&
			    (cudaDeviceSynchronize() != cudaSuccess ||
			     cudaMemcpy(&secs, dsecs, sizeof(secs),
					cudaMemcpyDeviceToHost) != cudaSuccess))
				rc = DL_EIO;
			cudaFree(dsecs);
		}
#endif
		if (rc != 0)
			break;
		double per = secs / iters;
		double busbw =
		    2.0 * (world - 1) / world * (double)sizes[s] / per / 1e9;
		if (rank == 0) {
			printf("{\"impl\": \"%s\", \"world\": %d, "
			       "\"bytes\": %llu, \"iters\": %d, "
			       "\"latency_us\": %.3f, \"busbw_gbps\": %.4f}\n",
			       impl, world, (unsigned long long)sizes[s], iters,
			       per * 1e6, busbw);
			fflush(stdout);
		}
	}
	if (rc != 0)
		fprintf(stderr, "dist_bench: rank %d: all-reduce failed: %s\n",
			rank, dl_strerror(rc));
#ifdef DLAUNCH_HAVE_CUDA
	if (use_cuda)
		cudaFree(buf);
#endif
	free(host);
	dist_free(d);
	dist_flight_free(flight);
	return rc == 0 ? 0 : 1;
}
