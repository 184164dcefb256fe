# SPDX-License-Identifier: Apache-2.0
# libFuzzer harnesses over the file readers (tests/fuzz/fuzz_*.c), built
# with clang straight from the sources so every file is instrumented, like
# rendezvous/module.mk's fuzz-rdzv. `make fuzz` runs each for
# $(FUZZ_SECONDS); new inputs go to $(BUILD)/fuzz/corpus_NAME, the
# committed seeds in tests/fuzz/corpus/NAME stay as they are.
FUZZ_CC ?= clang
FUZZ_FLAGS := -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all -Iinclude -D_GNU_SOURCE -std=c11 -pthread
# jsonh.c and the hang analysis need jansson: only the harnesses that link
# it take them
FUZZ_COMMON := $(filter-out common/jsonh.c common/hang%.c,$(wildcard common/*.c))
FUZZ_HANG := $(wildcard common/hang*.c)

FUZZ_ckpt_SRCS := trainer/ckpt.c trainer/mlp.c trainer/rng.c
FUZZ_ckpt_LIBS := $(BLAS_LIBS) -lm
FUZZ_control_SRCS := trainer/control_msg.c
FUZZ_control_LIBS :=
FUZZ_idx_SRCS := trainer/data.c trainer/rng.c
FUZZ_idx_LIBS := $(ZLIB_LIBS) -lm
FUZZ_journal_SRCS := rendezvous/journal.c $(RDZV_STATE_SRCS) common/jsonh.c \
	$(FUZZ_HANG)
FUZZ_journal_LIBS := -Irendezvous $(JSON_LIBS) $(SSL_LIBS) -lm
# the etcd gateway layer is private to agent/etcd/: -Iagent/etcd, its header a
# prerequisite (FUZZ_NAME_DEPS: files the harness reads but does not build)
FUZZ_etcd_proto_SRCS := agent/etcd/etcd_proto.c agent/etcd/etcd_answer.c \
	agent/etcd/etcd_answer_field.c \
	agent/etcd/etcd_stream.c common/jsonh.c
FUZZ_etcd_proto_LIBS := -Iagent/etcd $(JSON_LIBS) -lm
FUZZ_etcd_proto_DEPS := agent/etcd/etcd_proto.h agent/etcd/etcd_answer_int.h
# the worker control channel's lines (agent/control_proto.h)
FUZZ_control_proto_SRCS := agent/control_proto.c common/jsonh.c
FUZZ_control_proto_LIBS := -Iagent/etcd $(JSON_LIBS) -lm
FUZZ_control_proto_DEPS := agent/control_proto.h
# an agent's record of its groups, as a later agent reads it
# (agent/keeper/keeper_record.h; keeper_proc.c for the helpers it links)
FUZZ_record_SRCS := agent/keeper/keeper_record.c agent/keeper/keeper_proc.c
FUZZ_record_LIBS := -lm
FUZZ_record_DEPS := agent/keeper/keeper_record.h agent/keeper/keeper_proc.h
# the hang analysis over any node reports (include/dlaunch/hang.h)
FUZZ_hang_SRCS := $(FUZZ_HANG)
FUZZ_hang_LIBS := $(JSON_LIBS) -lm
FUZZ_hang_DEPS := common/hang_int.h
# the flat JSON reader against jansson (include/dlaunch/jsonflat.h)
FUZZ_jsonflat_SRCS :=
FUZZ_jsonflat_LIBS := $(JSON_LIBS)

# $(call reader_fuzzer,NAME)
define reader_fuzzer
$(BUILD)/fuzz/fuzz_$(1): tests/fuzz/fuzz_$(1).c $$(FUZZ_$(1)_SRCS) \
		$$(FUZZ_COMMON) $$(wildcard include/dlaunch/*.h trainer/*.h) \
		tests/fuzz/memfile.h $$(FUZZ_$(1)_DEPS)
	@mkdir -p $$(@D)
	$$(call quiet,LD)$$(FUZZ_CC) $$(FUZZ_FLAGS) -o $$@ $$< $$(FUZZ_$(1)_SRCS) \
		$$(FUZZ_COMMON) $$(FUZZ_$(1)_LIBS)

.PHONY: fuzz-$(1)
fuzz-$(1): $(BUILD)/fuzz/fuzz_$(1)
	@mkdir -p $(BUILD)/fuzz/corpus_$(1)
	$$< -max_total_time=$$(FUZZ_SECONDS) -rss_limit_mb=1024 -max_len=8192 \
		-timeout=10 -print_final_stats=1 $(BUILD)/fuzz/corpus_$(1) \
		tests/fuzz/corpus/$(1)
FUZZ_RUNS += fuzz-$(1)
endef
$(foreach f,ckpt idx journal etcd_proto control_proto control hang jsonflat record,$(eval $(call reader_fuzzer,$(f))))
