# test/preload/: integration tests of the preload shim on the simulated driver (tier test-preload),
# and the shim's benchmarks (bench-shim, bench-threads). The test binary links the simulated driver
# (direct binding) and a stand-in runtime, and runs under LD_PRELOAD=libgpuarena.so in Check's fork mode; it writes
# $(RESULTS)/preload.tap.
PRELOAD_DIR     := $(BUILD)/preload
PRELOAD_SRC     := $(filter-out test/preload/fake_cudart.c test/preload/fake_plugin.c test/preload/ctor_lib.c test/preload/bench_%.c \
                     test/preload/t_lean.c test/preload/hostfail_prog.c test/preload/flockgate_prog.c,$(wildcard test/preload/*.c))
PRELOAD_TEST    := $(PRELOAD_DIR)/test_preload
PRELOAD_FAKE    := $(PRELOAD_DIR)/libcudart.so
PRELOAD_CTOR    := $(PRELOAD_DIR)/libgactor.so
PRELOAD_PLUGIN  := $(PRELOAD_DIR)/libgaplugin.so
PRELOAD_BENCH   := $(PRELOAD_DIR)/bench_shim
PRELOAD_THREADS := $(PRELOAD_DIR)/bench_threads
PRELOAD_CTXB    := $(PRELOAD_DIR)/bench_ctx
PRELOAD_NULLDRV := $(PRELOAD_DIR)/nulldrv/libcuda.so.1
PRELOAD_HOSTFAIL := $(PRELOAD_DIR)/hostfail_prog
PRELOAD_FLOCKGATE := $(PRELOAD_DIR)/flockgate_prog
# A sanitizer runtime must come first in the initial library list, before the preloaded shim.
PRELOAD_SANLIB   = $(if $(findstring address,$(SAN)),$(shell $(CC) -print-file-name=libasan.so)) \
                   $(if $(findstring thread,$(SAN)),$(shell $(CC) -print-file-name=libtsan.so))
PRELOAD_ENV      = LD_LIBRARY_PATH=$(BUILD)/sim:$(PRELOAD_DIR) \
                   LD_PRELOAD="$(strip $(PRELOAD_SANLIB) $(abspath $(SHIM_LIB)))"

ALL += $(PRELOAD_TEST) $(PRELOAD_HOSTFAIL) $(PRELOAD_FLOCKGATE) $(PRELOAD_BENCH) $(PRELOAD_THREADS) $(PRELOAD_CTXB) $(PRELOAD_NULLDRV)
TEST_TIERS += test-preload
BENCHES += bench-shim bench-threads bench-ctx

$(PRELOAD_FAKE): test/preload/fake_cudart.c $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -shared -o $@ $< -L$(BUILD)/sim -lcuda $(LDFLAGS_COMMON)

$(PRELOAD_CTOR): test/preload/ctor_lib.c $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -shared -o $@ $< -L$(BUILD)/sim -lcuda $(LDFLAGS_COMMON)

# Under its own soname, linked to nothing: an interposer, not a driver (t_hardening.c).
$(PRELOAD_PLUGIN): test/preload/fake_plugin.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -shared -Wl,-soname,libgaplugin.so -o $@ $< $(LDFLAGS_COMMON)

$(PRELOAD_TEST): $(PRELOAD_SRC) $(wildcard test/preload/*.h) $(PRELOAD_FAKE) $(PRELOAD_CTOR) $(PRELOAD_PLUGIN) \
                 $(BUILD)/sim/libcuda.so $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CHECK_CFLAGS) -I$(CUDA)/include -Itest/sim -o $@ $(PRELOAD_SRC) \
	  -L$(BUILD)/sim -L$(PRELOAD_DIR) -lcuda -lcudart $(BUILD)/lib/libgaalloc.a \
	  $(LDFLAGS_COMMON) $(CHECK_LIBS) -ldl -lpthread

# Its own malloc, calloc, realloc and strdup must be exported and uninstrumented: no visibility flag, no
# sanitizer (a sanitizer runtime preloaded first still serves the calls it passes on).
$(PRELOAD_HOSTFAIL): test/preload/hostfail_prog.c test/sim/simcuda.h $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(OPT) -g $(WARN) -rdynamic -I$(CUDA)/include -Itest/sim -o $@ $< \
	  -L$(BUILD)/sim -lcuda -ldl

# Its own flock, exported and uninstrumented, as hostfail_prog's malloc (t_trace_race.c).
$(PRELOAD_FLOCKGATE): test/preload/flockgate_prog.c $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(OPT) -g $(WARN) -rdynamic -I$(CUDA)/include -o $@ $< -L$(BUILD)/sim -lcuda -ldl

$(PRELOAD_NULLDRV): test/preload/bench_nulldrv.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic \
	  -o $@ $< $(LDFLAGS_COMMON)

$(PRELOAD_BENCH): test/preload/bench_shim.c $(BUILD)/sim/libcuda.so $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -Itest/sim -Iallocator -o $@ $< -L$(BUILD)/sim -lcuda \
	  $(BUILD)/lib/libgaalloc.a -ldl $(LDFLAGS_COMMON)

# Linked against the null driver: it needs cuCtxCreate_v2, which only the null driver provides here.
$(PRELOAD_THREADS): test/preload/bench_threads.c $(PRELOAD_NULLDRV)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -o $@ $< -L$(PRELOAD_DIR)/nulldrv -l:libcuda.so.1 \
	  -lpthread $(LDFLAGS_COMMON)

# Linked against the null driver, as bench_threads.
$(PRELOAD_CTXB): test/preload/bench_ctx.c $(PRELOAD_NULLDRV)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -o $@ $< -L$(PRELOAD_DIR)/nulldrv -l:libcuda.so.1 \
	  $(LDFLAGS_COMMON)

.PHONY: test-preload bench-shim bench-threads bench-ctx
# Under ThreadSanitizer every case's time limit is tripled: stream_kernelctx's 162 children take
# 290 s there on a loaded 2-core machine against its 300 s (timed out once, 2026-12-07).
test-preload: $(PRELOAD_TEST) $(PRELOAD_HOSTFAIL) $(PRELOAD_FLOCKGATE) $(SHIM_LIB) $(SHIM_HOOK_NAMES) $(SIM_NVML)
	@mkdir -p $(RESULTS)
	@CK_TAP_LOG_FILE_NAME=$(RESULTS)/preload.tap CK_FORK=yes CK_DEFAULT_TIMEOUT=20 \
	  $(if $(findstring thread,$(SAN)),CK_TIMEOUT_MULTIPLIER=3) PT_SHIM=$(SHIM_LIB) PT_HOOKS=$(SHIM_HOOK_NAMES) PT_CUDART=$(GA_CUDART) $(PRELOAD_ENV) \
	  $(PRELOAD_TEST) >$(RESULTS)/preload.log 2>&1 || true; \
	  grep -E '^[0-9]+%: Checks' $(RESULTS)/preload.log | sed 's/^/preload: /' || true
	@$(call ga_skip_without_cudart,preload,real_cudart_gets_hooks)

# Per-call cost of the shim against the driver called directly (see bench_shim.c).
bench-shim: $(PRELOAD_BENCH) $(SHIM_LIB) $(PRELOAD_NULLDRV)
	@BENCH_SHIM=$(abspath $(SHIM_LIB)) BENCH_SIM=$(abspath $(BUILD)/sim) \
	  BENCH_NULLDRV=$(abspath $(PRELOAD_DIR)/nulldrv) LD_LIBRARY_PATH=$(BUILD)/sim $(PRELOAD_BENCH)

# Throughput with 1-8 threads on one and two contexts, arena mode, null driver (bench_threads.c).
bench-threads: $(PRELOAD_THREADS) $(SHIM_LIB) $(PRELOAD_NULLDRV)
	@BENCH_SHIM=$(abspath $(SHIM_LIB)) BENCH_NULLDRV=$(abspath $(PRELOAD_DIR)/nulldrv) \
	  LD_LIBRARY_PATH=$(PRELOAD_DIR)/nulldrv $(PRELOAD_THREADS)

# What making a context current costs under the shim (bench_ctx.c): the driver alone, then the shim.
bench-ctx: $(PRELOAD_CTXB) $(SHIM_LIB) $(PRELOAD_NULLDRV)
	@echo "| run | cuCtxSetCurrent, same context (ns) | cuCtxPushCurrent + cuCtxPopCurrent (ns) | cuCtxSetCurrent, two contexts in turn (ns) |"
	@echo "|---|---|---|---|"
	@LD_LIBRARY_PATH=$(PRELOAD_DIR)/nulldrv $(PRELOAD_CTXB)
	@GPUARENA_MODE=arena GPUARENA_LOG=error LD_LIBRARY_PATH=$(PRELOAD_DIR)/nulldrv \
	  LD_PRELOAD=$(abspath $(SHIM_LIB)) $(PRELOAD_CTXB)

# Tier test-lean: every hook against the lean simulated driver (test/sim/build.mk, SIM_LEAN_LIB),
# which lacks the optional entry points; its own binary, linked against the lean driver.
PRELOAD_LEAN := $(PRELOAD_DIR)/test_lean
ALL += $(PRELOAD_LEAN)
TEST_TIERS += test-lean

$(PRELOAD_LEAN): test/preload/t_lean.c test/sim/simcuda.h $(PRELOAD_FAKE) $(SIM_LEAN_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(CHECK_CFLAGS) -I$(CUDA)/include -Itest/sim -o $@ $< \
	  -L$(BUILD)/sim-lean -L$(PRELOAD_DIR) -lcuda -lcudart $(LDFLAGS_COMMON) $(CHECK_LIBS) -ldl

.PHONY: test-lean
test-lean: $(PRELOAD_LEAN) $(SHIM_LIB) $(SHIM_HOOK_NAMES)
	@mkdir -p $(RESULTS)
	@CK_TAP_LOG_FILE_NAME=$(RESULTS)/lean.tap CK_FORK=yes PT_HOOKS=$(SHIM_HOOK_NAMES) \
	  LD_LIBRARY_PATH=$(BUILD)/sim-lean:$(PRELOAD_DIR) \
	  LD_PRELOAD="$(strip $(PRELOAD_SANLIB) $(abspath $(SHIM_LIB)))" $(PRELOAD_LEAN) \
	  >$(RESULTS)/lean.log 2>&1 || true; \
	  grep -E '^[0-9]+%: Checks' $(RESULTS)/lean.log | sed 's/^/lean: /' || true
