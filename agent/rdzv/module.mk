# SPDX-License-Identifier: Apache-2.0
# agent/rdzv/: $(AGENT_RDZV_LIB), the rendezvous backends' contract, below
# the agent and every backend: the interface a backend implements and the
# events it posts to the round loop it is given (rdzv.h, event.h), the
# helpers every backend shares (rdzv.c), the address a node announces
# (addr.c) and the HTTP client on the event loop (client.c,
# dlaunch/agent_client.h, which the launcher uses too).
#
# It includes no header from above this folder and needs nothing at link
# time but $(COMMON_LIB) and the system's libraries (libevent, libcurl,
# jansson): the etcd backend (agent/etcd/, $(ETCD_LIB)) links this alone
# of the agent, and libagent.a (the round loop, the static and HTTP
# backends) chooses among them. Link order: $(AGENT_LIB) $(ETCD_LIB)
# $(AGENT_RDZV_LIB) ... $(COMMON_LIB). tests/e2e/layers.sh keeps it so.
AGENT_RDZV_SRCS := $(wildcard agent/rdzv/*.c)
OBJS += $(call objs,$(AGENT_RDZV_SRCS))
$(AGENT_RDZV_LIB): $(call objs,$(AGENT_RDZV_SRCS))

.PHONY: agent-rdzv
agent-rdzv: $(AGENT_RDZV_LIB)
