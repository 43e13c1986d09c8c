# test/unit/: one Check binary from every test/unit/*.c, linked with the allocator library.
# Tier test-unit writes $(RESULTS)/unit.tap (Check honours CK_TAP_LOG_FILE_NAME) and always
# exits 0; the summary script decides. Tests that read the shared traces find them through
# GA_TRACES_DIR (../shared/traces beside the clone).
UNIT_SRC := $(wildcard test/unit/*.c)
UNIT_OBJ := $(UNIT_SRC:%.c=$(BUILD)/obj/%.o)
UNIT_BIN := $(BUILD)/test/unit_tests

ALL += $(UNIT_BIN)
TEST_TIERS += test-unit

$(BUILD)/obj/test/unit/%.o: test/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CHECK_CFLAGS) -Iallocator -Itest/unit -MMD -MP -c $< -o $@

# test_hami.c tests the device plugins' limit parser in shim/group_host.c (plain C, no CUDA): the
# ledger's objects (GROUP_OBJ, shim/build.mk) come from test/group/build.mk's rule.
$(UNIT_BIN): $(UNIT_OBJ) $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS_COMMON) -o $@ $(UNIT_OBJ) $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a \
	  $(CHECK_LIBS) -lpthread

.PHONY: test-unit
test-unit: $(UNIT_BIN)
	@mkdir -p $(RESULTS)
	@rm -f $(RESULTS)/unit.tap
	@GA_TRACES_DIR=$(GA_TRACES_DIR) CK_TAP_LOG_FILE_NAME=$(RESULTS)/unit.tap \
	  $(abspath $(UNIT_BIN)) || true

-include $(UNIT_OBJ:.o=.d)
