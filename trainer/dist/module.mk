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

$(eval $(call unit_test,test_dist,$(DIST_LIB) $(COMMON_LIB),$(CUDA_LIBS)))

.PHONY: dist
dist: $(DIST_LIB) $(BUILD)/tests/test_dist
# The test checks the NCCL backend's absence (or presence) by this define,
# and where it is present runs it on device buffers (cuda_runtime.h).
$(BUILD)/obj/tests/unit/test_dist.o: CPPFLAGS += $(filter -D%,$(CUDA_CPPFLAGS))
ifneq ($(NVCC),)
$(BUILD)/obj/tests/unit/test_dist.o: CPPFLAGS += -isystem $(CUDA_HOME)/include
endif
