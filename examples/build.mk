# Examples: small driver-API programs built against the simulated driver's libcuda.so but with no
# rpath, so the same binaries run on a real GPU (they find libcuda.so.1 through LD_LIBRARY_PATH).
# test-examples runs each on the simulated driver; `make demo` compares gpuarena's modes on them.
EX_LINKED := ex_direct ex_fragment ex_train ex_alloctime
EX_LOADED := ex_dlsym ex_getproc
EX_BINS   := $(addprefix $(BUILD)/examples/,$(EX_LINKED) $(EX_LOADED))
EX_SHIM   := $(BUILD)/lib/libgpuarena.so

ALL += $(EX_BINS)
TEST_TIERS += test-examples

$(addprefix $(BUILD)/examples/,$(EX_LINKED)): $(BUILD)/examples/%: examples/%.c examples/ex_common.h \
                                              $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -o $@ $< -L$(BUILD)/sim -lcuda $(LDFLAGS_COMMON)

$(addprefix $(BUILD)/examples/,$(EX_LOADED)): $(BUILD)/examples/%: examples/%.c examples/ex_common.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -o $@ $< -ldl $(LDFLAGS_COMMON)

.PHONY: test-examples demo
test-examples: $(EX_BINS) $(SIM_LIB)
	@mkdir -p $(RESULTS)
	@sh examples/test_examples.sh $(BUILD) >$(RESULTS)/examples.tap 2>$(RESULTS)/examples.log || true

# The demo builds the shim when its folder exists, and runs without it (saying so) when it does not.
demo: deps
	@$(MAKE) --no-print-directory $(EX_BINS) $(SIM_LIB)
	@if [ -f shim/build.mk ]; then $(MAKE) --no-print-directory $(EX_SHIM) || \
	  echo "demo: the shim did not build; running without it"; fi
	@sh examples/demo.sh $(BUILD)
