# SPDX-License-Identifier: Apache-2.0
# agent/: libagent.a, the per-node agent dlaunch runs (the round loop, the
# static and HTTP rendezvous backends, workers and their output, failure
# reports, hang collection, preemption).
# The keeper (agent/keeper/module.mk, $(KEEPER_LIB)), the etcd backend
# (agent/etcd/module.mk, $(ETCD_LIB)) and the backends' contract below
# them both (agent/rdzv/module.mk, $(AGENT_RDZV_LIB)) are units of their
# own: whatever links this library links $(ETCD_LIB), $(KEEPER_LIB) and
# $(AGENT_RDZV_LIB) after it, in that order.
AGENT_SRCS := $(wildcard agent/*.c)
OBJS += $(call objs,$(AGENT_SRCS))
$(AGENT_LIB): $(call objs,$(AGENT_SRCS))

AGENT_TEST_LIBS := $(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) \
	$(COMMON_LIB)
AGENT_TEST_LDLIBS := $(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm
$(eval $(call unit_test,test_agent,$(AGENT_TEST_LIBS),$(AGENT_TEST_LDLIBS)))
# the round loop cell by cell (test_agent_fsm) and in whole sequences
# (test_agent_fsm_seq), on the recording fixture of agent_fsm_fix.c
AGENT_FSM_FIX := $(call objs,tests/unit/agent_fsm_fix.c)
OBJS += $(AGENT_FSM_FIX)
$(eval $(call unit_test,test_agent_fsm,$(AGENT_FSM_FIX) $(AGENT_TEST_LIBS),$(AGENT_TEST_LDLIBS)))
$(eval $(call unit_test,test_agent_fsm_seq,$(AGENT_FSM_FIX) $(AGENT_TEST_LIBS),$(AGENT_TEST_LDLIBS)))
$(eval $(call unit_test,test_control_proto,$(AGENT_TEST_LIBS),$(AGENT_TEST_LDLIBS)))
$(eval $(call unit_test,test_agent_control,$(AGENT_TEST_LIBS),$(AGENT_TEST_LDLIBS)))
$(eval $(call unit_test,test_hang_agent,$(AGENT_TEST_LIBS),$(AGENT_TEST_LDLIBS)))

.PHONY: agent
agent: $(AGENT_LIB) $(BUILD)/tests/test_agent \
	$(BUILD)/tests/test_agent_fsm $(BUILD)/tests/test_agent_fsm_seq \
	$(BUILD)/tests/test_control_proto $(BUILD)/tests/test_agent_control \
	$(BUILD)/tests/test_hang_agent
