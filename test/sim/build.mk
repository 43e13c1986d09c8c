# The simulated CUDA driver: $(BUILD)/sim/libcuda.so.1 (+ libcuda.so link), its lean build
# ($(BUILD)/sim-lean), the simulated NVML ($(BUILD)/sim/libnvidia-ml.so.1), and its own test tier.
SIM_SRC  := $(wildcard test/sim/sim_*.c)
SIM_OBJ  := $(patsubst test/sim/%.c,$(BUILD)/sim/obj/%.o,$(SIM_SRC)) $(BUILD)/sim/obj/size.o \
            $(BUILD)/sim/obj/va_fit.o
SIM_LIB  := $(BUILD)/sim/libcuda.so.1
SIM_TEST := $(BUILD)/sim/test_sim
SIM_TEST_SRC := $(wildcard test/sim/test_sim*.c)

ALL += $(SIM_LIB) $(BUILD)/sim/libcuda.so $(SIM_TEST)
TEST_TIERS += test-sim

$(BUILD)/sim/obj/%.o: test/sim/%.c test/sim/sim_internal.h test/sim/sim_procs.h test/sim/sim_stream.h \
                      test/sim/simcuda.h allocator/ga_size.h allocator/ga_vafit.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -c $< -o $@

# Sizes (SIMCUDA_TOTAL_MEM...) are read with the one size grammar: the allocator's parser, compiled in.
$(BUILD)/sim/obj/size.o: allocator/size.c allocator/ga_size.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -c $< -o $@

# Where an allocation lies in the device's addresses: the model the replay's backend places its
# regions by (allocator/ga_vafit.h), compiled in, so the two agree by construction.
$(BUILD)/sim/obj/va_fit.o: allocator/va_fit.c allocator/ga_vafit.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -c $< -o $@

# -Bsymbolic: as in the real driver, the driver's own references (the cuGetProcAddress table)
# bind to its own functions, never to the same names exported by a preloaded shim.
$(SIM_LIB): $(SIM_OBJ)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic $(LDFLAGS_COMMON) -o $@ $^ -lpthread

$(BUILD)/sim/libcuda.so: $(SIM_LIB)
	ln -sf libcuda.so.1 $@

# The simulated NVML, $(BUILD)/sim/libnvidia-ml.so.1: answers from the simulated driver's state
# through simcuda.h, so it links the driver (whichever libcuda.so.1 the library path finds).
SIM_NVML := $(BUILD)/sim/libnvidia-ml.so.1
ALL += $(SIM_NVML) $(BUILD)/sim/libnvidia-ml.so

$(SIM_NVML): test/sim/nvml_sim.c shim/ga_nvml.h test/sim/simcuda.h $(BUILD)/sim/libcuda.so
	$(CC) $(CFLAGS_COMMON) -Itest/sim -shared -Wl,-soname,libnvidia-ml.so.1 $(LDFLAGS_COMMON) -o $@ $< \
	  -L$(BUILD)/sim -lcuda

$(BUILD)/sim/libnvidia-ml.so: $(SIM_NVML)
	ln -sf libnvidia-ml.so.1 $@

# The lean driver: the same sources with -DSIMCUDA_LEAN, exporting everything but the optional entry
# points simcuda.h lists in SIMCUDA_LEAN_OMITS (a version script made from that list), so a test can
# play an older driver that lacks them.
SIM_LEAN_OBJ := $(patsubst test/sim/%.c,$(BUILD)/sim-lean/obj/%.o,$(SIM_SRC)) $(BUILD)/sim/obj/size.o \
                $(BUILD)/sim/obj/va_fit.o
SIM_LEAN_LIB := $(BUILD)/sim-lean/libcuda.so.1
SIM_LEAN_MAP := $(BUILD)/sim-lean/lean.map
ALL += $(SIM_LEAN_LIB) $(BUILD)/sim-lean/libcuda.so

$(BUILD)/sim-lean/obj/%.o: test/sim/%.c test/sim/sim_internal.h test/sim/sim_procs.h \
                           test/sim/sim_stream.h test/sim/simcuda.h allocator/ga_size.h \
                           allocator/ga_vafit.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -DSIMCUDA_LEAN -I$(CUDA)/include -c $< -o $@

$(SIM_LEAN_MAP): test/sim/simcuda.h
	@mkdir -p $(@D)
	printf '#define SIMCUDA_LIST_ONLY\n#include "simcuda.h"\n#define SIM_LOCAL(name) name;\n%s\n' \
	  '{ global: *; local: SIMCUDA_LEAN_OMITS(SIM_LOCAL) };' | $(CC) -E -P -x c -Itest/sim - > $@

$(SIM_LEAN_LIB): $(SIM_LEAN_OBJ) $(SIM_LEAN_MAP)
	$(CC) -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic -Wl,--version-script=$(SIM_LEAN_MAP) \
	  $(LDFLAGS_COMMON) -o $@ $(SIM_LEAN_OBJ) -lpthread

$(BUILD)/sim-lean/libcuda.so: $(SIM_LEAN_LIB)
	ln -sf libcuda.so.1 $@

$(SIM_TEST): $(SIM_TEST_SRC) test/sim/test_sim.h test/sim/test_sim_stream.h test/sim/simcuda.h \
             shim/ga_nvml.h $(BUILD)/sim/libcuda.so \
             $(BUILD)/sim/libnvidia-ml.so
	$(CC) $(CFLAGS_COMMON) $(CHECK_CFLAGS) -I$(CUDA)/include -Itest/sim -Ishim -o $@ $(SIM_TEST_SRC) \
	  -L$(BUILD)/sim -lcuda -lnvidia-ml $(LDFLAGS_COMMON) $(CHECK_LIBS) -ldl

# The reuse-hazard program (test/sim/hazard.c): runs on the simulated driver alone or under the shim.
SIM_HAZARD := $(BUILD)/sim/hazard
ALL += $(SIM_HAZARD)

$(SIM_HAZARD): test/sim/hazard.c test/sim/simcuda.h $(BUILD)/sim/libcuda.so
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -Itest/sim -o $@ $< -L$(BUILD)/sim -lcuda -lpthread $(LDFLAGS_COMMON)

.PHONY: test-sim
test-sim: $(SIM_TEST) $(SIM_LEAN_LIB) $(SIM_HAZARD)
	@mkdir -p $(RESULTS)
	@CK_TAP_LOG_FILE_NAME=$(RESULTS)/sim.tap CK_FORK=yes LD_LIBRARY_PATH=$(BUILD)/sim \
	  SIMCUDA_TEST_CUDART=$(GA_CUDART) SIMCUDA_TEST_LEAN=$(abspath $(SIM_LEAN_LIB)) \
	  SIMCUDA_TEST_HAZARD=$(abspath $(SIM_HAZARD)) \
	  $(SIM_TEST) \
	  >$(RESULTS)/sim.log 2>&1 || true; \
	  grep -E '^[0-9]+%: Checks' $(RESULTS)/sim.log | sed 's/^/sim: /' || true
	@$(call ga_skip_without_cudart,sim,cuda_runtime_table)
