# SPDX-License-Identifier: Apache-2.0
# tests/unit.mk: unit tests that span modules (each module's own tests are
# in its module.mk).
$(eval $(call unit_test,test_cli_defaults,$(RDZV_LIB) $(TRAIN_LIB) \
	$(COMMON_LIB),$(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) $(BLAS_LIBS) \
	$(ZLIB_LIBS) -lm))
# the recorded fake etcd client (tests/unit/etcd_fake.h), linked before
# libetcd.a by the tests of what runs on the client
ETCD_FAKE := $(call objs,tests/unit/etcd_fake.c)
OBJS += $(ETCD_FAKE)
# the etcd leader (agent/etcd/) with the rendezvous rules (rendezvous/)
$(eval $(call unit_test,test_etcd_leader,$(ETCD_FAKE) $(ETCD_LIB) \
	$(RDZV_STATE_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(JSON_LIBS) -lm))
# the campaign for the leader key (agent/etcd/etcd_campaign.c), every cell
# of its table; a campaign it wins runs the leader, hence the rules
$(eval $(call unit_test,test_etcd_campaign,$(ETCD_FAKE) $(ETCD_LIB) \
	$(RDZV_STATE_LIB) $(COMMON_LIB),$(EVENT_LIBS) $(JSON_LIBS) -lm))
# the node key's "recovery" over etcd (agent/etcd/etcd_recovery.c)
$(eval $(call unit_test,test_etcd_recovery,$(ETCD_LIB) $(RDZV_STATE_LIB) \
	$(COMMON_LIB),$(JSON_LIBS) -lm))
# the key layout of an etcd job (agent/etcd/etcd_keys.c)
$(eval $(call unit_test,test_etcd_keys,$(ETCD_LIB) $(COMMON_LIB),))
# the end time in an etcd job record, for reruns (agent/etcd/etcd_record.c)
$(eval $(call unit_test,test_etcd_record,$(ETCD_LIB) $(RDZV_STATE_LIB) \
	$(COMMON_LIB),$(JSON_LIBS) -lm))
