# test/cmd: the `gpuarena` command's tests (Python unittest, TAP to $(RESULTS)/cmd.tap). The end to
# end tests need the shim, the simulated driver, the examples and the replay tool, so the tier
# builds them first: a missing piece fails the tier instead of skipping tests. GA_SAN_RUNTIME
# (test/stress/build.mk) is the ASan runtime in an ASan build, preloaded ahead of the shim.
CMD_TEST_DEPS := $(BUILD)/bin/gpuarena-replay $(BUILD)/lib/libgpuarena.so \
	$(BUILD)/sim/libcuda.so.1 $(BUILD)/examples/ex_direct $(BUILD)/examples/ex_dlsym \
	$(BUILD)/examples/ex_getproc $(BUILD)/test/sizeprobe $(BUILD)/bin/bench-scale $(BUILD)/bin/bench-alloc $(BUILD)/bin/bench-pairs \
	$(BUILD)/test/replay_checkfail $(BUILD)/test/traceplay $(BUILD)/bin/bench-patterns \
	$(BUILD)/bench/nulldrv/libcuda.so.1

# gpuarena-replay with invariant failures forged in vmm mode under --check (ga_replay wrapped at
# link time; the allocator has no switch for it), for test_replay.py's CheckFailures.
$(BUILD)/test/replay_checkfail: test/cmd/replay_checkfail.c scripts/replay_main.c \
		scripts/replay_args.c scripts/replay_args.h allocator/ga_replay.h $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Iallocator -o $@ scripts/replay_main.c scripts/replay_args.c \
		test/cmd/replay_checkfail.c \
		-Wl,--wrap=ga_replay $(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON)

# What a program sees of device memory, for the size-grammar table (test_sizes.py).
$(BUILD)/test/sizeprobe: test/cmd/sizeprobe.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -o $@ $< -ldl $(LDFLAGS_COMMON)

# A trace played through cuMemAlloc/cuMemFree, under the shim on the simulated driver, for
# test_vmm_traces.py (vmm's mapped peak on the shared traces, as the driver counts it).
$(BUILD)/test/traceplay: test/cmd/traceplay.c test/sim/simcuda.h $(BUILD)/sim/libcuda.so.1
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -Itest/sim -o $@ $< -L$(BUILD)/sim -lcuda -ldl $(LDFLAGS_COMMON)

TEST_TIERS += test-cmd
BENCHES += bench-cmd

.PHONY: test-cmd bench-cmd
test-cmd: $(CMD_TEST_DEPS)
	@mkdir -p $(RESULTS)
	@GA_TRACES_DIR=$(GA_TRACES_DIR) GPUARENA_BUILD=$(abspath $(BUILD)) GA_CUDA=$(abspath $(CUDA)) \
	  GA_SAN_RUNTIME="$(GA_SAN_RUNTIME)" python3 test/cmd/run_tests.py $(RESULTS)/cmd.tap \
	  2>$(RESULTS)/cmd.log || true

bench-cmd: $(BUILD)/bin/gpuarena-replay
	@GA_TRACES_DIR=$(GA_TRACES_DIR) GPUARENA_BUILD=$(abspath $(BUILD)) \
	  python3 test/cmd/bench_replay.py
