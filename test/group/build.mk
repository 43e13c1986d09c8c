# test/group/: the group ledger (shim/group.c) on its own, no CUDA and no shim: group_test runs real
# processes and threads against it (TAP -> $(RESULTS)/group.tap), and group_member is the small
# member process the `gpuarena top` tests (test/cmd/test_top.py) start to fill ledgers. Both link
# the ledger's object with the allocator library (for the size grammar) and nothing else.
GROUP_OBJ  := $(BUILD)/obj/group/group.o
GROUP_TEST := $(BUILD)/test/group_test
GROUP_MEMBER := $(BUILD)/test/group_member

ALL += $(GROUP_TEST) $(GROUP_MEMBER)
TEST_TIERS += test-group

# Compiled apart from the shim's own object so this tier builds even while the shim does not link.
$(GROUP_OBJ): shim/group.c shim/ga_group.h shim/group_layout.h allocator/ga_size.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -c $< -o $@

$(BUILD)/test/group_%: test/group/group_%.c $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a shim/group_layout.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ishim -o $@ $< $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON) -lpthread

.PHONY: test-group
test-group: $(GROUP_TEST)
	@mkdir -p $(RESULTS)
	@d=$$(mktemp -d /dev/shm/gpuarena-test-XXXXXX 2>/dev/null || mktemp -d); \
	  timeout 300 ./$(GROUP_TEST) $$d >$(RESULTS)/group.tap 2>$(RESULTS)/group.log; rc=$$?; \
	  rm -rf $$d; \
	  if [ $$rc != 0 ]; then echo "not ok - group: group_test exited with $$rc (see $(RESULTS)/group.log)" \
	    >>$(RESULTS)/group.tap; fi; true

# The command tier's `gpuarena top` tests start group_member.
test-cmd: $(GROUP_MEMBER)
