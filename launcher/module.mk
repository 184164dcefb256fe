# SPDX-License-Identifier: Apache-2.0
# launcher/: the dlaunch binary (command line, --standalone, status).
LAUNCHER_SRCS := $(wildcard launcher/*.c)
OBJS += $(call objs,$(LAUNCHER_SRCS))
BINS += $(BUILD)/bin/dlaunch

# --standalone embeds the rendezvous server (librdzv.a)
$(BUILD)/bin/dlaunch: $(call objs,$(LAUNCHER_SRCS)) $(AGENT_LIB) \
		$(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) $(RDZV_LIB) $(COMMON_LIB)
	@mkdir -p $(@D)
	$(call quiet,LD)$(CC) $(LDFLAGS) -o $@ $^ $(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) \
		$(SSL_LIBS) -lm

# the command line (test_launcher) and its etcd options
# (test_launcher_etcd), both parsing through tests/unit/launcher_fix.c
LAUNCHER_TEST_FIX := $(call objs,tests/unit/launcher_fix.c)
OBJS += $(LAUNCHER_TEST_FIX)
LAUNCHER_TEST_OBJS := $(LAUNCHER_TEST_FIX) $(call objs,launcher/options.c \
	launcher/rdzv_conf.c launcher/etcd_options.c launcher/devices.c)
$(eval $(call unit_test,test_launcher,$(LAUNCHER_TEST_OBJS) \
	$(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm))
$(eval $(call unit_test,test_launcher_etcd,$(LAUNCHER_TEST_OBJS) \
	$(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm))

$(eval $(call unit_test,test_devices,$(call objs,launcher/devices.c) \
	$(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm))

.PHONY: launcher
launcher: $(BUILD)/bin/dlaunch $(BUILD)/tests/test_launcher \
	$(BUILD)/tests/test_launcher_etcd \
	$(BUILD)/tests/test_devices agent
