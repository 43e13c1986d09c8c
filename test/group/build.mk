# test/group/: the group ledger (shim/group.c, shim/group_join.c, shim/group_host.c) and the NVML
# hooks (shim/nvml.c) on their own, without the shim: tier test-group -> $(RESULTS)/group.tap.
#   group_test    real processes and threads against the ledger (no CUDA)
#   nvml_test     nvml.c over the simulated NVML, preloaded as libganvml.so (nvml.c, the ledger and
#                 nvml_view.c's stand-in ga_mem_view), one case per run
#   group_member  the small member process the `gpuarena top` tests (test/cmd/test_top.py) start
#   t_outside129.py  an outside check through the shim on the simulated driver (probe129.py members;
#                 skipped where the shim or the simulated driver is not built)
# The ledger's object is compiled apart from the shim's, so this tier builds while the shim does not.
GROUP_TEST      := $(BUILD)/test/group_test
GROUP_MEMBER    := $(BUILD)/test/group_member
GROUP_NVML_LIB  := $(BUILD)/test/libganvml.so
GROUP_NVML_TEST := $(BUILD)/test/nvml_test

ALL += $(GROUP_TEST) $(GROUP_MEMBER) $(GROUP_NVML_LIB) $(GROUP_NVML_TEST)
TEST_TIERS += test-group

$(GROUP_OBJ): $(BUILD)/obj/group/%.o: shim/%.c shim/ga_group.h shim/group_layout.h shim/group_host.h \
		shim/group_internal.h allocator/ga_size.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -c $< -o $@

$(GROUP_MEMBER): $(BUILD)/test/group_%: test/group/group_%.c $(GROUP_OBJ) \
		$(BUILD)/lib/libgaalloc.a shim/group_layout.h test/group/procstat.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ishim -o $@ $< $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON) -lpthread

# group_test is three files (group_test.c runs the cases, group_test_files.c and
# group_test_stale.c hold the later ones).
GROUP_TEST_SRC := test/group/group_test.c test/group/group_test_files.c test/group/group_test_stale.c
$(GROUP_TEST): $(GROUP_TEST_SRC) test/group/group_test.h $(GROUP_OBJ) \
		$(BUILD)/lib/libgaalloc.a shim/group_layout.h test/group/procstat.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ishim -o $@ $(GROUP_TEST_SRC) $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a \
	  $(LDFLAGS_COMMON) -lpthread

$(GROUP_NVML_LIB): shim/nvml.c test/group/nvml_view.c $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a shim/ga_nvml.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ishim -shared -o $@ shim/nvml.c test/group/nvml_view.c $(GROUP_OBJ) \
	  $(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON) -ldl -lpthread

$(GROUP_NVML_TEST): test/group/nvml_test.c $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a \
		$(BUILD)/sim/libnvidia-ml.so $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Ishim -I$(CUDA)/include -o $@ $< $(GROUP_OBJ) $(BUILD)/lib/libgaalloc.a \
	  -L$(BUILD)/sim -lnvidia-ml -lcuda $(LDFLAGS_COMMON) -lpthread

# Ledgers go to a fresh directory (the NVML cases use /dev/shm itself, under a group name made
# from the shell's pid, as the hooks read the default place).
.PHONY: test-group
test-group: $(GROUP_TEST) $(GROUP_NVML_LIB) $(GROUP_NVML_TEST)
	@mkdir -p $(RESULTS)
	@d=$$(mktemp -d /dev/shm/gpuarena-test-XXXXXX 2>/dev/null || mktemp -d); \
	  timeout 300 $(abspath $(GROUP_TEST)) $$d >$(RESULTS)/group.tap 2>$(RESULTS)/group.log; rc=$$?; \
	  rm -rf $$d; \
	  if [ $$rc != 0 ]; then echo "not ok - group: group_test exited with $$rc (see $(RESULTS)/group.log)" \
	    >>$(RESULTS)/group.tap; fi; \
	  n() { LD_LIBRARY_PATH=$(BUILD)/sim SIMCUDA_TOTAL_MEM=16GiB LD_PRELOAD=$(GROUP_NVML_LIB) \
	    timeout 60 $(abspath $(GROUP_NVML_TEST)) "$$@" >>$(RESULTS)/group.tap 2>>$(RESULTS)/group.log || \
	    echo "not ok - nvml $$1: nvml_test exited with $$? (see $(RESULTS)/group.log)" >>$(RESULTS)/group.tap; }; \
	  n pass; \
	  GA_TEST_VIEW="1073741824 314572800" n cap; \
	  GA_TEST_VIEW="1073741824 314572800" SIMCUDA_NVML_MIG=1 n mig; \
	  GA_TEST_VIEW="68719476736 1073741824" n big; \
	  GA_TEST_VIEW="1073741824 2147483648" n over; \
	  GA_TEST_VIEW="8589934592 0" n crowded; \
	  GA_TEST_VIEW="1073741824 0" SIMCUDA_NVML_HIDE_PIDS=1 GPUARENA_GROUP=nvmltest-$$$$ n procs; \
	  timeout 600 python3 test/group/t_outside129.py $(abspath $(BUILD)) >>$(RESULTS)/group.tap \
	    2>>$(RESULTS)/group.log || echo "not ok - outside129: t_outside129.py exited with $$? (see \
	    $(RESULTS)/group.log)" >>$(RESULTS)/group.tap; true

# The command tier's `gpuarena top` tests start group_member.
test-cmd: $(GROUP_MEMBER)
