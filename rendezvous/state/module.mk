# SPDX-License-Identifier: Apache-2.0
# rendezvous/state/: librdzv_state.a, the rendezvous state machine
# (dlaunch/rdzv_state.h: jobs, rounds, deadlines, the per-job store, the
# durable form, hang triggers and the preemption's stop step; the rules,
# with no sockets, files or clocks). It needs only libdlcommon and
# jansson: any host can link it and drive it, the server (rendezvous/)
# and the agent's etcd leader alike.
#
# Nothing here includes a header of rendezvous/ (api, http, journal,
# page): these objects are compiled without -Irendezvous, so such a
# header is not found, and the unit tests below link this archive alone,
# so a call into the server's layers fails their build. The Makefile reads this fragment
# before rendezvous/module.mk, which builds these objects into librdzv.a
# as well.
RDZV_STATE_SRCS := rendezvous/state/state.c rendezvous/state/round.c \
	rendezvous/state/join.c rendezvous/state/node_events.c \
	rendezvous/state/deadlines.c rendezvous/state/state_json.c \
	rendezvous/state/state_save.c rendezvous/state/kv.c \
	rendezvous/state/history.c rendezvous/state/runs.c \
	rendezvous/state/master.c rendezvous/state/hangs.c \
	rendezvous/state/preempt.c
OBJS += $(call objs,$(RDZV_STATE_SRCS))
$(RDZV_STATE_LIB): $(call objs,$(RDZV_STATE_SRCS))

# test_rdzv_state, _save and _preempt share the nodes and events of
# tests/unit/rdzv_state_fix.c
RDZV_STATE_FIX := $(call objs,tests/unit/rdzv_state_fix.c)
OBJS += $(RDZV_STATE_FIX)
RDZV_STATE_FIX_TESTS := test_rdzv_state test_rdzv_save test_rdzv_preempt
$(foreach t,$(RDZV_STATE_FIX_TESTS),$(eval $(call unit_test,$(t),\
	$(RDZV_STATE_FIX) $(RDZV_STATE_LIB) $(COMMON_LIB),$(JSON_LIBS) -lm)))
$(foreach t,test_rdzv_runs test_rdzv_hang,$(eval $(call unit_test,$(t),\
	$(RDZV_STATE_LIB) $(COMMON_LIB),$(JSON_LIBS) -lm)))
RDZV_STATE_TESTS := $(RDZV_STATE_FIX_TESTS) test_rdzv_runs test_rdzv_hang

.PHONY: rdzv-state
rdzv-state: $(RDZV_STATE_LIB) $(addprefix $(BUILD)/tests/,$(RDZV_STATE_TESTS))
