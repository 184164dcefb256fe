# SPDX-License-Identifier: Apache-2.0
# agent/keeper/: what keeps a node's workers from outliving their agent.
# $(KEEPER_LIB) is what the agent links (keeper.h: starting the keeper,
# telling it of each group, the record a next agent reads); dlaunch-keeper
# is the keeper as a small program of its own, installed beside dlaunch,
# which finds it there (libc and the common helpers only).
#
# Nothing here includes an agent/ header: the agent's side reaches the
# rest only through the public dlaunch/ headers (spawn.h for the one spawn
# function, common/spawn.c), and links on $(COMMON_LIB) alone
# (tests/e2e/layers.sh keeps it so).
KEEPER_SRCS := agent/keeper/keeper.c agent/keeper/keeper_proc.c \
	agent/keeper/keeper_record.c
OBJS += $(call objs,$(KEEPER_SRCS) agent/keeper/keeper_main.c)
$(KEEPER_LIB): $(call objs,$(KEEPER_SRCS))

BINS += $(BUILD)/bin/dlaunch-keeper
$(BUILD)/bin/dlaunch-keeper: $(call objs,agent/keeper/keeper_main.c) \
		$(KEEPER_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ -lm

# the strict parse of an agent's record (keeper_record.c), on the
# keeper's library alone
$(eval $(call unit_test,test_keeper_record,$(KEEPER_LIB) $(COMMON_LIB),))

.PHONY: keeper
keeper: $(BUILD)/bin/dlaunch-keeper $(BUILD)/tests/test_keeper_record
