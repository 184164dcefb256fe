# rendezvous/: dlaunch-rdzv and librdzv.a (everything but main.c, so the
# launcher can embed the server for --standalone).
RDZV_SRCS := $(filter-out rendezvous/main.c,$(wildcard rendezvous/*.c))
OBJS += $(call objs,$(RDZV_SRCS) rendezvous/main.c)
$(RDZV_LIB): $(call objs,$(RDZV_SRCS))

ifneq ($(wildcard rendezvous/main.c),)
RDZV_BIN := $(BUILD)/bin/dlaunch-rdzv
BINS += $(RDZV_BIN)
endif
$(BUILD)/bin/dlaunch-rdzv: $(call objs,rendezvous/main.c) $(RDZV_LIB) \
		$(COMMON_LIB)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) -lm

RDZV_UNIT_TESTS := $(patsubst tests/unit/%.c,%,$(wildcard tests/unit/test_rdzv*.c))
$(foreach t,$(RDZV_UNIT_TESTS),$(eval $(call unit_test,$(t),\
	$(RDZV_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) -lm)))

.PHONY: rendezvous
rendezvous: $(RDZV_BIN) $(RDZV_LIB) \
	$(addprefix $(BUILD)/tests/,$(RDZV_UNIT_TESTS))
