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

$(eval $(call unit_test,test_launcher,$(call objs,launcher/options.c \
	launcher/rdzv_conf.c launcher/etcd_options.c launcher/devices.c) \
	$(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm))

$(eval $(call unit_test,test_devices,$(call objs,launcher/devices.c) \
	$(AGENT_LIB) $(ETCD_LIB) $(KEEPER_LIB) $(AGENT_RDZV_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(CURL_LIBS) $(JSON_LIBS) -lm))

.PHONY: launcher
launcher: $(BUILD)/bin/dlaunch $(BUILD)/tests/test_launcher \
	$(BUILD)/tests/test_devices agent
