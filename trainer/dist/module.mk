# SPDX-License-Identifier: Apache-2.0
# trainer/dist/: the collective library of dlaunch-train (libdist.a):
# the TCP backend always, the NCCL backend when CUDA is found; without
# CUDA, dist_nccl_nocuda.c answers that there is no NCCL backend.
#
# It stands on its own: nothing here includes a trainer header (the
# trainer and the benchmarks include dist/dist.h, dist/dist_flight.h), and
# dist_sock.c, the bootstrap's sockets, knows nothing of struct dist.
DIST_SRCS := trainer/dist/dist.c trainer/dist/dist_fault.c \
	trainer/dist/dist_flight.c trainer/dist/dist_net.c \
	trainer/dist/dist_sock.c trainer/dist/dist_tcp_backend.c \
	trainer/dist/dist_tcp.c trainer/dist/dist_p2p.c \
	trainer/dist/dist_reduce.c
ifneq ($(NVCC),)
DIST_SRCS += trainer/dist/dist_nccl.c
# -isystem: NCCL's header has old-style prototypes our warnings reject.
$(call objs,trainer/dist/dist_nccl.c): CPPFLAGS += -isystem $(CUDA_HOME)/include
else
DIST_SRCS += trainer/dist/dist_nccl_nocuda.c
endif
# The reduction loops are the hot path: let the compiler vectorise them.
ifneq ($(SANITIZE),1)
$(call objs,trainer/dist/dist_reduce.c): CFLAGS += -O3
endif

OBJS += $(call objs,$(DIST_SRCS))
$(DIST_LIB): $(call objs,$(DIST_SRCS))

# the unit tests, one program per concern (tests/unit/test_dist_*.c), on
# a shared fixture: the harness and data (dist_fix.c) and the collective
# bodies the TCP and NCCL programs both run (dist_bodies.c)
DIST_TEST_FIX := $(call objs,tests/unit/dist_fix.c tests/unit/dist_bodies.c)
OBJS += $(DIST_TEST_FIX)
DIST_TESTS := test_dist_ops test_dist_config test_dist_nccl test_dist_faults \
	test_dist_flight
$(foreach t,$(DIST_TESTS),$(eval $(call unit_test,$(t),$(DIST_TEST_FIX) \
	$(DIST_LIB) $(COMMON_LIB),$(CUDA_LIBS))))

.PHONY: dist
dist: $(DIST_LIB) $(addprefix $(BUILD)/tests/,$(DIST_TESTS))
# The tests check the NCCL backend's absence (or presence) by this define,
# and where it is present run it on device buffers (cuda_runtime.h).
DIST_TEST_OBJS := $(DIST_TEST_FIX) \
	$(patsubst %,$(BUILD)/obj/tests/unit/%.o,$(DIST_TESTS))
$(DIST_TEST_OBJS): CPPFLAGS += $(filter -D%,$(CUDA_CPPFLAGS))
ifneq ($(NVCC),)
$(DIST_TEST_OBJS): CPPFLAGS += -isystem $(CUDA_HOME)/include
endif
