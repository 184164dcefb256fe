# SPDX-License-Identifier: Apache-2.0
# common/: helpers several modules share (logging, errors, parsing, buffers,
# JSON, time, files, checksums, the option engine, the /proc reader, the
# one spawn function of dlaunch/spawn.h, which the agent, its keeper and
# the launcher use). Only jsonh.c needs jansson; the trainer links this
# archive without jansson and so must not call jsonh_*.
COMMON_SRCS := $(wildcard common/*.c)
OBJS += $(call objs,$(COMMON_SRCS))
$(COMMON_LIB): $(call objs,$(COMMON_SRCS))

$(eval $(call unit_test,test_common,$(COMMON_LIB),$(JSON_LIBS)))
# the flat JSON reader, checked against jansson
$(eval $(call unit_test,test_jsonflat,$(COMMON_LIB),$(JSON_LIBS)))
$(eval $(call unit_test,test_opt,$(COMMON_LIB),))
$(eval $(call unit_test,test_backoff,$(COMMON_LIB),))
# the hang analysis: its rules (test_hang) and the rest (test_hang_report),
# on the report builders of tests/unit/hang_fix.c
HANG_TEST_FIX := $(call objs,tests/unit/hang_fix.c)
OBJS += $(HANG_TEST_FIX)
$(eval $(call unit_test,test_hang,$(HANG_TEST_FIX) $(COMMON_LIB),$(JSON_LIBS)))
$(eval $(call unit_test,test_hang_report,$(HANG_TEST_FIX) $(COMMON_LIB),$(JSON_LIBS)))
$(eval $(call unit_test,test_procfs,$(COMMON_LIB),))
# the one spawn function (spawn.c)
$(eval $(call unit_test,test_spawn,$(COMMON_LIB),))
