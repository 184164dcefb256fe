# SPDX-License-Identifier: Apache-2.0
# rendezvous/: dlaunch-rdzv and librdzv.a (everything but main.c, so the
# launcher can embed the server for --standalone): the HTTP API, the
# journal, metrics and the status page over the state machine.
#
# The state machine is its own unit in rendezvous/state/ (its fragment,
# read before this one, declares $(RDZV_STATE_SRCS) and librdzv_state.a);
# librdzv.a holds its objects too, so the server links one archive.

# The status page (rendezvous/page/) is compiled in: embed.sh turns its
# files into C arrays, so the binary serves it with no file beside it.
PAGE_FILES := rendezvous/page/index.html rendezvous/page/page.js \
	rendezvous/page/page.css
PAGE_GEN := $(BUILD)/gen/rendezvous/page_files.c
$(PAGE_GEN): $(PAGE_FILES) rendezvous/page/embed.sh
	@mkdir -p $(@D)
	$(call quiet,GEN)sh rendezvous/page/embed.sh $(PAGE_FILES) >$@
$(call objs,$(PAGE_GEN)): CPPFLAGS += -Irendezvous

RDZV_SRCS := $(filter-out rendezvous/main.c,$(wildcard rendezvous/*.c))
OBJS += $(call objs,$(RDZV_SRCS) rendezvous/main.c $(PAGE_GEN))
$(RDZV_LIB): $(call objs,$(RDZV_SRCS) $(RDZV_STATE_SRCS) $(PAGE_GEN))

ifneq ($(wildcard rendezvous/main.c),)
RDZV_BIN := $(BUILD)/bin/dlaunch-rdzv
BINS += $(RDZV_BIN)
endif
$(BUILD)/bin/dlaunch-rdzv: $(call objs,rendezvous/main.c) $(RDZV_LIB) \
		$(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) -lm

# the server's unit tests (the state machine's are rendezvous/state/'s)
RDZV_UNIT_TESTS := $(filter-out $(RDZV_STATE_TESTS),\
	$(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_rdzv*.c)))
$(foreach t,$(RDZV_UNIT_TESTS),\
	$(eval $(call unit_test,$(t),$(RDZV_LIB) $(COMMON_LIB),\
	$(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) -lm)))

.PHONY: rendezvous
rendezvous: $(RDZV_BIN) $(RDZV_LIB) rdzv-state \
	$(addprefix $(BUILD)/tests/,$(RDZV_UNIT_TESTS))

# libFuzzer harness over the request handling (api.c into the state
# machine), built with clang straight from the sources so every file is
# instrumented. `make fuzz` runs it for $(FUZZ_SECONDS); new inputs go to
# $(BUILD)/fuzz/corpus_rdzv, the committed seeds stay as they are.
FUZZ_CC ?= clang
RDZV_FUZZ_SRCS := tests/fuzz/fuzz_rdzv_api.c rendezvous/api.c rendezvous/api_hang.c \
	rendezvous/api_node.c rendezvous/api_kv.c \
	rendezvous/api_heartbeat.c \
	rendezvous/request.c rendezvous/journal.c rendezvous/page.c \
	$(PAGE_GEN) $(RDZV_STATE_SRCS) \
	$(wildcard common/*.c)
$(BUILD)/fuzz/fuzz_rdzv_api: $(RDZV_FUZZ_SRCS) $(wildcard rendezvous/*.h) \
		$(wildcard rendezvous/state/*.h) \
		include/dlaunch/rdzv_state.h
	@mkdir -p $(@D)
	$(call quiet,LD)$(FUZZ_CC) -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -Iinclude -Irendezvous -D_GNU_SOURCE \
		-std=c11 \
		-o $@ $(RDZV_FUZZ_SRCS) $(JSON_LIBS) $(SSL_LIBS) -lm

.PHONY: fuzz-rdzv
fuzz-rdzv: $(BUILD)/fuzz/fuzz_rdzv_api
	@mkdir -p $(BUILD)/fuzz/corpus_rdzv
	$< -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -timeout=10 \
		-print_final_stats=1 $(BUILD)/fuzz/corpus_rdzv \
		tests/fuzz/corpus_rdzv
FUZZ_RUNS += fuzz-rdzv
