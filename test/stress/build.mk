# test/stress/: stress, fork, context-teardown, bad-argument and RTLD_NEXT programs run under LD_PRELOAD of
# the shim on the simulated driver (tier test-stress -> $(RESULTS)/stress.tap, run-stress.sh),
# and the sanitizer entry points the top-level Makefile calls:
#   test-asan      tier of `make test`: the C tiers again, built with ASan+UBSan in build-asan,
#                  their TAP lines folded into $(RESULTS)/asan.tap
#   san-tiers      (internal) runs SAN_TIERS in the current BUILD and prints the summary
#   valgrind-unit  the unit tests under valgrind --error-exitcode=1
STRESS_PROGS := threads fork teardown badargs next tracemem mutex
STRESS_BINS  := $(STRESS_PROGS:%=$(BUILD)/stress/stress_%)
STRESS_DEPS  := test/stress/stress_util.h test/sim/simcuda.h

# A sanitizer runtime must come first in the initial library list, before the preloaded shim:
# ASan checks it, and TSan's dlsym(RTLD_NEXT) lookups otherwise pass through the shim's dlsym
# (as in test/preload/build.mk).
GA_SAN_RUNTIME = $(strip $(if $(findstring address,$(SAN)),$(shell $(CC) -print-file-name=libasan.so)) \
                   $(if $(findstring thread,$(SAN)),$(shell $(CC) -print-file-name=libtsan.so)))

STRESS_NEXTLIB := $(BUILD)/stress/libganext.so

ALL += $(STRESS_BINS) $(STRESS_NEXTLIB)
TEST_TIERS += test-stress test-asan

$(BUILD)/stress/stress_%: test/stress/stress_%.c $(STRESS_DEPS) $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -Itest/sim -o $@ $< -L$(BUILD)/sim -lcuda \
	  $(LDFLAGS_COMMON) -lpthread -ldl

# The shim's lock on its own, built from its source (no CUDA).
$(BUILD)/stress/stress_mutex: test/stress/stress_mutex.c shim/mutex.c shim/mutex.h $(STRESS_DEPS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -Itest/sim -o $@ test/stress/stress_mutex.c shim/mutex.c \
	  $(LDFLAGS_COMMON) -lpthread

$(STRESS_NEXTLIB): test/stress/nextlib.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -shared -o $@ $< $(LDFLAGS_COMMON) -ldl

.PHONY: test-stress test-asan san-tiers valgrind-unit
test-stress: $(STRESS_BINS) $(STRESS_NEXTLIB) $(BUILD)/sim/libcuda.so $(BUILD)/lib/libgpuarena.so \
		$(BUILD)/bin/gpuarena-replay
	@mkdir -p $(RESULTS)
	@sh test/stress/run-stress.sh $(BUILD) $(RESULTS)/stress.tap "$(GA_SAN_RUNTIME)" \
	  "$(findstring thread,$(SAN))"

# The C tiers under a sanitizer, for `make asan/ubsan/tsan` (top-level Makefile) and test-asan.
SAN_TIERS ?= test-unit test-sim test-preload test-stress
# One line per step: make runs a line that names $(MAKE) even under -n, and the folder's rm and
# mkdir shared the sub-makes' line, so `make -n tsan` made an empty build-tsan (an outside check,
# 2026-12-07). A step that fails does not stop the next (|| true: the summary decides).
san-tiers:
	@$(MAKE) --no-print-directory -k build-all || true
	@rm -rf $(RESULTS) && mkdir -p $(RESULTS)
	@$(MAKE) --no-print-directory -k $(SAN_TIERS) || true
	@sh scripts/test-summary.sh $(RESULTS) $(patsubst test-%,%,$(SAN_TIERS))

# ASAN_FLAGS: top-level Makefile (shared with `make asan`). Skipped when this build is already
# a sanitizer build (`make test SAN=...`): no sanitizer build inside another.
# In a dry run (make -n: GA_DRY_RUN) the line still runs, since it names $(MAKE): it only shows
# the sub-make, which wrote asan.log and asan.tap into an existing results folder (2026-12-07).
GA_DRY_RUN = $(findstring n,$(firstword -$(MAKEFLAGS)))
test-asan:
	@mkdir -p $(RESULTS)
	@if [ -n "$(GA_DRY_RUN)" ]; then \
	  echo "$(MAKE) --no-print-directory san-tiers BUILD=build-asan OPT=-O1 SAN=\"$(ASAN_FLAGS)\" >$(RESULTS)/asan.log 2>&1"; \
	elif [ -n "$(SAN)" ]; then echo "ok - asan # SKIP already a sanitizer build" >$(RESULTS)/asan.tap; \
	else \
	  $(MAKE) --no-print-directory san-tiers BUILD=build-asan OPT=-O1 SAN="$(ASAN_FLAGS)" \
	    >$(RESULTS)/asan.log 2>&1; \
	  for t in $(patsubst test-%,%,$(SAN_TIERS)); do \
	    f=build-asan/results/$$t.tap; \
	    if [ -s $$f ]; then grep -E '^(not )?ok' $$f | sed -E "s/^(not ok|ok)( [0-9]+)?( -)?/\1 - asan $$t:/"; \
	    else echo "not ok - asan $$t: no results (build or run failed, see $(RESULTS)/asan.log)"; fi; \
	  done >$(RESULTS)/asan.tap; \
	fi

# Fork mode off so valgrind's exit code covers every test; the unit tests' failures show in the
# TAP file, so an exit of 1 with no "not ok" line there is valgrind's own verdict.
VALGRIND := valgrind --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
            --track-origins=yes --quiet
valgrind-unit: $(BUILD)/test/unit_tests
	@mkdir -p $(RESULTS)
	@GA_TRACES_DIR=$(GA_TRACES_DIR) CK_FORK=no CK_TAP_LOG_FILE_NAME=$(RESULTS)/valgrind.tap \
	  $(VALGRIND) $(abspath $(BUILD)/test/unit_tests); rc=$$?; \
	  bad=$$(grep -c '^not ok' $(RESULTS)/valgrind.tap 2>/dev/null); \
	  if [ $$rc = 0 ]; then echo "valgrind: unit tests clean ($$(grep -c '^ok' $(RESULTS)/valgrind.tap) passed)"; \
	  elif [ "$${bad:-0}" != 0 ]; then echo "gpuarena: $$bad unit tests failed under valgrind" \
	    "(see $(RESULTS)/valgrind.tap)" >&2; exit 1; \
	  else echo "gpuarena: valgrind reported memory errors in the unit tests (above); rerun:" \
	    "$(VALGRIND) $(abspath $(BUILD)/test/unit_tests)" >&2; exit 1; fi
