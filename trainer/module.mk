# SPDX-License-Identifier: Apache-2.0
# trainer/: dlaunch-train, the data-parallel MLP trainer. The collective
# library (dist*.c, $(DIST_LIB)) has its own folder and fragment,
# trainer/dist/module.mk.
#
# $(TRAIN_LIB) holds the reusable parts (model, kernels on the CPU, data,
# sampler, optimizer, checkpoints, DDP) so unit tests link them; the GPU
# kernels (mlp_cuda.cu) are linked into the binary only, in CUDA builds,
# and backend_nocuda.c stands in for them otherwise.
TRAIN_SRCS := trainer/mlp.c trainer/mlp_cpu.c trainer/rng.c trainer/data.c \
	trainer/sampler.c trainer/optim.c trainer/ckpt.c trainer/ddp.c \
	trainer/options.c trainer/device.c trainer/control.c \
	trainer/control_msg.c trainer/control_dump.c trainer/control_state.c \
	trainer/progress.c
TRAIN_OBJS := $(call objs,$(TRAIN_SRCS))
TRAIN_MAIN_OBJS := $(call objs,trainer/main.c trainer/run.c trainer/reform.c)
OBJS += $(TRAIN_OBJS) $(TRAIN_MAIN_OBJS) $(call objs,trainer/backend_nocuda.c)
$(TRAIN_LIB): $(TRAIN_OBJS)

ifneq ($(NVCC),)
TRAIN_GPU_OBJS := $(BUILD)/obj/trainer/mlp_cuda.o
# nvcc's generated host code (static guards, unwinding) needs libstdc++
TRAIN_GPU_LIBS := $(CUDA_LIBS) -lstdc++
$(BUILD)/obj/trainer/mlp_cuda.o: trainer/mlp_cuda.cu \
		trainer/backend.h include/dlaunch/error.h
	@mkdir -p $(@D)
	$(call quiet,NVCC)$(NVCC) $(NVCCFLAGS) $(CUDA_CPPFLAGS) -Iinclude -c $< -o $@
else
TRAIN_GPU_OBJS := $(call objs,trainer/backend_nocuda.c)
TRAIN_GPU_LIBS :=
endif

# the binary needs the collective library; until its fragment exists the
# trainer target builds the library and unit tests only
ifneq ($(wildcard trainer/dist/module.mk),)
BINS += $(BUILD)/bin/dlaunch-train
$(BUILD)/bin/dlaunch-train: $(TRAIN_MAIN_OBJS) $(TRAIN_GPU_OBJS) $(TRAIN_LIB) \
		$(DIST_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(TRAIN_GPU_LIBS) $(BLAS_LIBS) $(ZLIB_LIBS) -lm
TRAIN_BIN := $(BUILD)/bin/dlaunch-train
endif

TRAIN_TEST_LIBS := $(TRAIN_LIB) $(COMMON_LIB)
TRAIN_TEST_LDLIBS := $(BLAS_LIBS) $(ZLIB_LIBS) -lm
$(eval $(call unit_test,test_mlp,$(TRAIN_TEST_LIBS),$(TRAIN_TEST_LDLIBS)))
$(eval $(call unit_test,test_data,$(TRAIN_TEST_LIBS),$(TRAIN_TEST_LDLIBS)))
$(eval $(call unit_test,test_sampler,$(TRAIN_TEST_LIBS),$(TRAIN_TEST_LDLIBS)))
$(eval $(call unit_test,test_ckpt,$(TRAIN_TEST_LIBS),$(TRAIN_TEST_LDLIBS)))
$(eval $(call unit_test,test_device,$(TRAIN_TEST_LIBS),$(TRAIN_TEST_LDLIBS)))
$(eval $(call unit_test,test_control,$(TRAIN_TEST_LIBS),$(TRAIN_TEST_LDLIBS) -pthread))
# the GPU backend against the CPU's: skipped without a GPU (and built
# against backend_nocuda.c where there is no CUDA)
$(eval $(call unit_test,test_mlp_cuda,$(TRAIN_GPU_OBJS) $(TRAIN_TEST_LIBS),$(TRAIN_GPU_LIBS) $(TRAIN_TEST_LDLIBS)))
$(BUILD)/obj/tests/unit/test_mlp_cuda.o: CPPFLAGS += $(filter -D%,$(CUDA_CPPFLAGS))
TRAIN_TESTS := $(BUILD)/tests/test_mlp $(BUILD)/tests/test_data \
	$(BUILD)/tests/test_sampler $(BUILD)/tests/test_ckpt \
	$(BUILD)/tests/test_device $(BUILD)/tests/test_mlp_cuda \
	$(BUILD)/tests/test_control
ifneq ($(wildcard trainer/dist/module.mk),)
$(eval $(call unit_test,test_train_ddp,$(TRAIN_LIB) $(DIST_LIB) $(COMMON_LIB),$(TRAIN_TEST_LDLIBS) $(CUDA_LIBS)))
# the NCCL backend behind the GPU backend's stream, and its peer failures
# (skipped without GPUs)
$(eval $(call unit_test,test_nccl,$(TRAIN_GPU_OBJS) $(TRAIN_LIB) $(DIST_LIB) $(COMMON_LIB),$(TRAIN_GPU_LIBS) $(TRAIN_TEST_LDLIBS)))
$(BUILD)/obj/tests/unit/test_nccl.o: CPPFLAGS += $(filter -D%,$(CUDA_CPPFLAGS))
ifneq ($(NVCC),)
$(BUILD)/obj/tests/unit/test_nccl.o: CPPFLAGS += -isystem $(CUDA_HOME)/include
endif
# the flight recorder and the dump file (read back with jansson, as the
# agent reads it)
$(eval $(call unit_test,test_flight,$(TRAIN_LIB) $(DIST_LIB) $(COMMON_LIB),$(JSON_LIBS) -pthread))
TRAIN_TESTS += $(BUILD)/tests/test_train_ddp $(BUILD)/tests/test_nccl \
	$(BUILD)/tests/test_flight
endif

.PHONY: trainer
trainer: $(TRAIN_BIN) $(TRAIN_LIB) $(TRAIN_TESTS)
