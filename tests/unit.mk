# tests/unit.mk: unit tests that span modules (each module's own tests are
# in its module.mk).
$(eval $(call unit_test,test_cli_defaults,$(RDZV_LIB) $(TRAIN_LIB) \
	$(COMMON_LIB),$(EVENT_LIBS) $(JSON_LIBS) $(SSL_LIBS) $(BLAS_LIBS) \
	$(ZLIB_LIBS) -lm))
