# SPDX-License-Identifier: Apache-2.0
# agent/etcd/: $(ETCD_LIB), the agent's rendezvous backend over etcd
# (docs/etcd.md): the wire layer (etcd_proto, etcd_answer, etcd_stream),
# the client (etcd_client, etcd_watch, etcd_lease), the key layout, the
# node's side (rdzv_etcd), the campaign, the leader, and what dlaunch
# status and dlaunch dump read over etcd.
#
# It implements ../rdzv.h (agent_rdzv_etcd_new; answers go to the round
# loop through that interface) and otherwise includes only the public
# dlaunch/ headers; nothing in agent/ includes a header of this folder.
# The backend interface's helpers (rdzv.c, fsm.c) and the HTTP client
# (client.c) are libagent.a's: a program of the agent links $(AGENT_LIB)
# first and this after it; one that makes the backend itself
# (bench/etcd_load.c) links this first and $(AGENT_LIB) after it.
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

.PHONY: etcd
etcd: $(ETCD_LIB) $(BUILD)/tests/test_etcd_proto \
	$(BUILD)/tests/test_etcd_answer $(BUILD)/tests/test_etcd_stream
