# SPDX-License-Identifier: Apache-2.0
# tests/progs.mk: C programs the end-to-end tests run as workers
# (tests/e2e/progs/*.c), built into $(BUILD)/tests/progs/ by make tests.
TEST_PROGS := $(BUILD)/tests/progs/undumpable
OBJS += $(call objs,tests/e2e/progs/undumpable.c)
$(BUILD)/tests/progs/undumpable: $(call objs,tests/e2e/progs/undumpable.c)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^
tests: $(TEST_PROGS)
