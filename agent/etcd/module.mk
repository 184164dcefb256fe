# SPDX-License-Identifier: Apache-2.0
# agent/etcd/: $(ETCD_LIB), the agent's rendezvous backend over etcd
# (docs/etcd.md): the wire layer (etcd_proto, etcd_answer, etcd_stream),
# the client (etcd_client, etcd_watch, etcd_lease), the key layout, the
# node's side (rdzv_etcd), the campaign, the leader, and what dlaunch
# status and dlaunch dump read over etcd.
#
# It implements the backends' contract of agent/rdzv/ (rdzv_etcd.h:
# agent_rdzv_etcd_new; answers go to whatever round loop it is given
# through that interface) and otherwise includes only the public
# dlaunch/ headers; the agent includes rdzv_etcd.h alone of this folder.
# At link time it needs $(AGENT_RDZV_LIB) (the contract's helpers, the
# HTTP client), $(RDZV_STATE_LIB) (the leader's rules) and
# $(COMMON_LIB), never $(AGENT_LIB): link it after $(AGENT_LIB) and
# before those. tests/e2e/layers.sh and test_etcd_alone keep it so.
ETCD_SRCS := $(wildcard agent/etcd/*.c)
OBJS += $(call objs,$(ETCD_SRCS))
$(ETCD_LIB): $(call objs,$(ETCD_SRCS))

# the gateway protocol alone, one program per file: the builders
# (etcd_proto), the answers' parsers (etcd_answer), the stream splitter
# (etcd_stream); the last two read recorded answers (etcd_proto_fix.c)
ETCD_PROTO_FIX := $(call objs,tests/unit/etcd_proto_fix.c)
OBJS += $(ETCD_PROTO_FIX)
$(eval $(call unit_test,test_etcd_proto,$(ETCD_LIB) $(COMMON_LIB),$(JSON_LIBS)))
$(eval $(call unit_test,test_etcd_answer,$(ETCD_PROTO_FIX) $(ETCD_LIB) \
	$(COMMON_LIB),$(JSON_LIBS)))
$(eval $(call unit_test,test_etcd_stream,$(ETCD_PROTO_FIX) $(ETCD_LIB) \
	$(COMMON_LIB),$(JSON_LIBS)))
# the gRPC streams' messages (etcd_grpc: keep-alive, watch), the watch's
# answers checked as the gateway's are (etcd_proto_fix.c); they are
# released by etcd_answer's code, hence jansson
$(eval $(call unit_test,test_etcd_grpc,$(ETCD_PROTO_FIX) $(ETCD_LIB) \
	$(COMMON_LIB),$(JSON_LIBS) -lm))

.PHONY: etcd
etcd: $(ETCD_LIB) $(BUILD)/tests/test_etcd_proto \
	$(BUILD)/tests/test_etcd_answer $(BUILD)/tests/test_etcd_stream \
	$(BUILD)/tests/test_etcd_grpc

# the etcd folder on the lower units alone: every object of $(ETCD_LIB)
# (--whole-archive) linked with $(AGENT_RDZV_LIB), $(RDZV_STATE_LIB) and
# $(COMMON_LIB), and no $(AGENT_LIB): an arrow back up to the agent makes
# this link, and so make tests, fail (tests/unit/test_etcd_alone.c)
UNIT_TESTS += $(BUILD)/tests/test_etcd_alone
OBJS += $(BUILD)/obj/tests/unit/test_etcd_alone.o
ETCD_ALONE_LIBS := $(AGENT_RDZV_LIB) $(RDZV_STATE_LIB) $(COMMON_LIB)
$(BUILD)/tests/test_etcd_alone: $(BUILD)/obj/tests/unit/test_etcd_alone.o \
		$(ETCD_LIB) $(ETCD_ALONE_LIBS)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $< -Wl,--whole-archive \
		$(ETCD_LIB) -Wl,--no-whole-archive $(ETCD_ALONE_LIBS) \
		$(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) $(TEST_LIBS) -lm
