# SPDX-License-Identifier: Apache-2.0
# rendezvous/: dlaunch-rdzv and librdzv.a (everything but main.c, so the
# launcher can embed the server for --standalone).
#
# The state machine (dlaunch/rdzv_state.h: the rules, with no sockets,
# files or clocks) is also its own archive, librdzv_state.a, which needs
# only libdlcommon and jansson: any host can link it and drive it, not just
# this server. Its unit test links that archive alone, so a dependency on
# the server's layers (api, journal, http) fails the build.
RDZV_STATE_SRCS := rendezvous/state.c rendezvous/round.c \
	rendezvous/deadlines.c rendezvous/state_json.c rendezvous/state_save.c \
	rendezvous/kv.c rendezvous/history.c rendezvous/runs.c rendezvous/master.c \
	rendezvous/hangs.c rendezvous/preempt.c
RDZV_STATE_LIB := $(BUILD)/lib/librdzv_state.a
$(RDZV_STATE_LIB): $(call objs,$(RDZV_STATE_SRCS))

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
$(RDZV_LIB): $(call objs,$(RDZV_SRCS) $(PAGE_GEN))

ifneq ($(wildcard rendezvous/main.c),)
RDZV_BIN := $(BUILD)/bin/dlaunch-rdzv
BINS += $(RDZV_BIN)
endif
$(BUILD)/bin/dlaunch-rdzv: $(call objs,rendezvous/main.c) $(RDZV_LIB) \
		$(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) -lm

RDZV_UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_rdzv*.c))
RDZV_STATE_TESTS := test_rdzv_state test_rdzv_runs test_rdzv_hang
$(foreach t,$(filter-out $(RDZV_STATE_TESTS),$(RDZV_UNIT_TESTS)),\
	$(eval $(call unit_test,$(t),$(RDZV_LIB) $(COMMON_LIB),\
	$(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) -lm)))
$(foreach t,$(filter $(RDZV_STATE_TESTS),$(RDZV_UNIT_TESTS)),\
	$(eval $(call unit_test,$(t),$(RDZV_STATE_LIB) $(COMMON_LIB),\
	$(JSON_LIBS) -lm)))

.PHONY: rendezvous
rendezvous: $(RDZV_BIN) $(RDZV_LIB) $(RDZV_STATE_LIB) \
	$(addprefix $(BUILD)/tests/,$(RDZV_UNIT_TESTS))

# libFuzzer harness over the request handling (api.c into the state
# machine), built with clang straight from the sources so every file is
# instrumented. `make fuzz` runs it for $(FUZZ_SECONDS); new inputs go to
# $(BUILD)/fuzz/corpus_rdzv, the committed seeds stay as they are.
FUZZ_CC ?= clang
RDZV_FUZZ_SRCS := tests/fuzz/fuzz_rdzv_api.c rendezvous/api.c rendezvous/api_hang.c \
	rendezvous/api_heartbeat.c \
	rendezvous/request.c rendezvous/journal.c rendezvous/page.c \
	$(PAGE_GEN) $(RDZV_STATE_SRCS) \
	$(wildcard common/*.c)
$(BUILD)/fuzz/fuzz_rdzv_api: $(RDZV_FUZZ_SRCS) $(wildcard rendezvous/*.h) \
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
