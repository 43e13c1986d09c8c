# test/fuzz/: libFuzzer targets (clang, ASan+UBSan) for the trace and lifetimes readers and the
# shim's option parsers, the allocator driven through ga_replay (ga_check after every event), plus
# a seeded mutation fuzz of the Python importers, and fuzz_hooks: seeded random sequences of the
# shim's hooked calls with hostile arguments, under LD_PRELOAD in every mode (gcc, no libFuzzer).
#   make test-fuzz    tier: each target FUZZ_TIME seconds (default 20), seeded; writes fuzz.tap
#   make fuzz-long    each target FUZZ_LONG_TIME seconds (default 600), keeping its corpus
# The fuzzers are not in ALL: they need clang and libclang-rt (scripts/setup.sh installs both),
# and are built by the tier itself, which reports a failed build as a "not ok" line.
FUZZ_CC        ?= clang
FUZZ_DIR       := $(BUILD)/fuzz
FUZZ_TIME      ?= 20
FUZZ_LONG_TIME ?= 600
FUZZ_IMPORT_COUNT ?= 300
FUZZ_HOOK_OPS  ?= 20000
FUZZ_TARGETS   := trace lifetimes options replay
FUZZ_CFLAGS    := -std=gnu11 -g -O1 -fvisibility=hidden $(WARN) -fno-omit-frame-pointer \
                  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all

TEST_TIERS += test-fuzz

$(FUZZ_DIR)/fuzz_trace: test/fuzz/fuzz_trace.c test/fuzz/fuzz_util.h allocator/trace.c \
		allocator/ga_trace.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Iallocator -o $@ test/fuzz/fuzz_trace.c allocator/trace.c

$(FUZZ_DIR)/fuzz_lifetimes: test/fuzz/fuzz_lifetimes.c test/fuzz/fuzz_util.h allocator/trace.c \
		allocator/lifetimes.c allocator/ga_trace.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Iallocator -o $@ test/fuzz/fuzz_lifetimes.c allocator/trace.c \
	  allocator/lifetimes.c

# options.c is compiled alone: it has the shim's types but calls nothing of CUDA or the loader.
# shim.h is written for gcc; clang does not know every gcc attribute name it uses.
$(FUZZ_DIR)/fuzz_options: test/fuzz/fuzz_options.c test/fuzz/fuzz_util.h shim/options.c shim/shim.h shim/stats.h \
		allocator/size.c allocator/ga_size.h allocator/mode.c allocator/ga_pool.h allocator/names.c \
		allocator/ga_names.h shim/group.c shim/group_join.c \
		shim/group_host.c shim/ga_group.h shim/group_host.h shim/group_internal.h
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -I$(CUDA)/include -o $@ \
	  test/fuzz/fuzz_options.c shim/options.c shim/group.c shim/group_join.c shim/group_host.c \
	  allocator/size.c allocator/mode.c allocator/names.c -lm -lpthread

# The allocator as a whole: every allocator/*.c, instrumented, behind ga_replay.
$(FUZZ_DIR)/fuzz_replay: test/fuzz/fuzz_replay.c test/fuzz/fuzz_util.h $(wildcard allocator/*.c) \
		$(wildcard allocator/*.h)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -Iallocator -o $@ test/fuzz/fuzz_replay.c $(wildcard allocator/*.c)

# Built as the preload tests are (the simulated driver linked directly); run under the shim.
$(FUZZ_DIR)/fuzz_hooks: test/fuzz/fuzz_hooks.c test/sim/simcuda.h $(BUILD)/sim/libcuda.so $(SHIM_LIB)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -Itest/sim -o $@ $< -L$(BUILD)/sim -lcuda $(LDFLAGS_COMMON)

$(FUZZ_DIR)/seeds/.done: test/fuzz/make_seeds.py
	@mkdir -p $(@D)
	GA_TRACES_DIR=$(GA_TRACES_DIR) python3 test/fuzz/make_seeds.py $(FUZZ_DIR)/seeds && touch $@

# $(1): seconds per target, $(2): "keep" to keep the corpus between runs, $(3): TAP file.
define ga_fuzz_run
	@mkdir -p $(FUZZ_DIR) && : > $(3)
	@$(MAKE) --no-print-directory -s $(FUZZ_DIR)/seeds/.done
	@for t in $(FUZZ_TARGETS); do \
	  if $(MAKE) --no-print-directory -s $(FUZZ_DIR)/fuzz_$$t >$(FUZZ_DIR)/build-$$t.log 2>&1; then \
	    sh test/fuzz/run-fuzz.sh $(FUZZ_DIR) $$t $(1) $(2) >>$(3); \
	  else \
	    echo "not ok - fuzz $$t: does not build (see $(FUZZ_DIR)/build-$$t.log; clang and" \
	      "libclang-rt come from scripts/setup.sh)" >>$(3); \
	  fi; \
	done
	@if $(MAKE) --no-print-directory -s $(FUZZ_DIR)/fuzz_hooks >$(FUZZ_DIR)/build-hooks.log 2>&1; then \
	  sh test/fuzz/run-hooks.sh $(FUZZ_DIR) $(abspath $(BUILD)/sim) $(abspath $(SHIM_LIB)) \
	    $(if $(2),30,3) $(FUZZ_HOOK_OPS) >>$(3); \
	else \
	  echo "not ok - fuzz hooks: does not build (see $(FUZZ_DIR)/build-hooks.log)" >>$(3); \
	fi
	@python3 test/fuzz/fuzz_import.py --count $(FUZZ_IMPORT_COUNT) --seed 1 \
	  --crash-dir $(FUZZ_DIR)/import-crashes --tap $(3) >$(FUZZ_DIR)/import.log 2>&1 || \
	  echo "not ok - import fuzz: did not run to the end (see $(FUZZ_DIR)/import.log)" >>$(3)
endef

.PHONY: test-fuzz fuzz-long
test-fuzz:
	@mkdir -p $(RESULTS)
	$(call ga_fuzz_run,$(FUZZ_TIME),,$(RESULTS)/fuzz.tap)

fuzz-long:
	$(call ga_fuzz_run,$(FUZZ_LONG_TIME),keep,$(FUZZ_DIR)/fuzz-long.tap)
	@cat $(FUZZ_DIR)/fuzz-long.tap
