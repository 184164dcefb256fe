# SPDX-License-Identifier: Apache-2.0
# bench/: benchmarks of dlaunch against the tools users would otherwise use
# (torchrun, PyTorch gloo, PyTorch DDP). Benchmarks are not tests: nothing
# here is part of `make test`. bench/README.md says what each one measures.
#
#   make bench          every benchmark, full sizes and repetitions, then the
#                       table of ratios; results in bench/results/
#   make bench-quick    the same with fewer sizes and repetitions (< 5 min)
#   make bench-build    only build the benchmark programs (also part of all)
#   make bench-launch | bench-restart | bench-nodeloss | bench-rdzv |
#        bench-etcd | bench-dist | bench-flight | bench-train | bench-ckpt |
#        bench-hang | bench-hangfp
#                       one benchmark (full)
#   make bench-report   redo the table and plots from bench/results/*.json
#
# BENCH_ARGS passes extra options to bench/bench.py (e.g. --reps 3).

BENCH_DIR  := $(BUILD)/bench
BENCH_PY   := /usr/bin/python3 bench/bench.py --build $(BUILD)
BENCH_BINS := $(BENCH_DIR)/rdzv_load $(BENCH_DIR)/etcd_load \
	$(BENCH_DIR)/floor_spawn

# The limit of the heartbeat path: a bare libevent HTTP server that answers
# every request with a fixed body (bench.py's rdzv benchmark runs it beside
# dlaunch-rdzv under the same rdzv_load).
BENCH_BINS += $(BENCH_DIR)/bare_http
OBJS += $(call objs,bench/bare_http.c)
$(BENCH_DIR)/bare_http: $(call objs,bench/bare_http.c) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) -lm

# What a lease keep-alive costs etcd on a gRPC stream and through its JSON
# gateway (bench.py's etcd benchmark, its "keepalive" part).
BENCH_BINS += $(BENCH_DIR)/etcd_keepalive
OBJS += $(call objs,bench/etcd_keepalive.c)
$(BENCH_DIR)/etcd_keepalive: $(call objs,bench/etcd_keepalive.c) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(CURL_LIBS)

# The floor of launch and restart: N workers exec'd by a minimal spawner
# (libc only, so its own start costs next to nothing).
OBJS += $(call objs,bench/floor_spawn.c)
$(BENCH_DIR)/floor_spawn: $(call objs,bench/floor_spawn.c)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^

# (rdzv_load.h says which file holds what)
RDZV_LOAD_SRCS := bench/rdzv_load.c bench/rdzv_load_node.c \
	bench/rdzv_load_http.c
OBJS += $(call objs,$(RDZV_LOAD_SRCS))
$(BENCH_DIR)/rdzv_load: $(call objs,$(RDZV_LOAD_SRCS)) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ -lm

# Simulated agents of the etcd backend: each is the agent's own backend
# (libetcd.a) and round loop (libagent.a), the leader's rules included
# (the state machine, librdzv_state.a from rendezvous/state/), in the
# agent's link order: the backend reports to the loop only through the
# contract below both (libagent_rdzv.a).
# (etcd_load.h says which file holds what)
ETCD_LOAD_SRCS := bench/etcd_load.c bench/etcd_load_sim.c \
	bench/etcd_load_counters.c bench/etcd_load_driver.c \
	bench/etcd_load_report.c
OBJS += $(call objs,$(ETCD_LOAD_SRCS))
$(BENCH_DIR)/etcd_load: $(call objs,$(ETCD_LOAD_SRCS)) $(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) \
		$(AGENT_RDZV_LIB) $(RDZV_STATE_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(CURL_LIBS) \
		$(JSON_LIBS) -lm

# The collective benchmark needs the dist library, which trainer/'s
# fragment declares ($(DIST_LIB)); bench/*.mk is read before trainer/*.mk,
# so test for the fragment, not the variable.
ifneq ($(wildcard trainer/dist/module.mk),)
BENCH_BINS += $(BENCH_DIR)/dist_bench
OBJS += $(call objs,bench/dist_bench.c)
# --device cuda (NCCL on a device buffer) in CUDA builds
$(call objs,bench/dist_bench.c): CPPFLAGS += $(CUDA_CPPFLAGS)
# (and the trainer's choice of GPU, trainer/device.c)
$(BENCH_DIR)/dist_bench: $(call objs,bench/dist_bench.c) \
		$(call objs,trainer/device.c) $(DIST_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(CUDA_LIBS) -lm
endif

# The checkpoint benchmark runs the trainer's checkpoint code ($(TRAIN_LIB),
# declared by trainer/module.mk).
ifneq ($(wildcard trainer/module.mk),)
BENCH_BINS += $(BENCH_DIR)/ckpt_bench
OBJS += $(call objs,bench/ckpt_bench.c)
$(BENCH_DIR)/ckpt_bench: $(call objs,bench/ckpt_bench.c) $(TRAIN_LIB) \
		$(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(BLAS_LIBS) $(ZLIB_LIBS) -lm
endif

.PHONY: bench-build bench-suite bench-launch bench-restart bench-nodeloss \
	bench-reform bench-trainloss bench-rdzv bench-etcd bench-dist bench-flight bench-train bench-ckpt \
	bench-hang bench-hangfp bench-report
all: $(BENCH_BINS)
bench-build: $(BENCH_BINS)

# Every run first builds everything (a sub-make: $(BINS) is not complete
# yet where this fragment is read, since bench/ sorts before the others).
BENCH_ONE = bench-launch bench-restart bench-nodeloss bench-reform bench-trainloss bench-rdzv bench-etcd \
	bench-dist bench-flight bench-train bench-ckpt bench-hang bench-hangfp
$(BENCH_ONE):
	@$(MAKE) --no-print-directory all
	$(BENCH_PY) $(patsubst bench-%,%,$@) $(BENCH_ARGS)

# One recipe runs them all in turn: benchmarks must not share the CPU with
# each other even under make -j.
bench-suite:
	@$(MAKE) --no-print-directory all
	$(BENCH_PY) all $(BENCH_ARGS)
BENCH_RUNS += bench-suite

bench-quick:
	@$(MAKE) --no-print-directory all
	$(BENCH_PY) all --quick $(BENCH_ARGS)

bench-report:
	$(BENCH_PY) report
