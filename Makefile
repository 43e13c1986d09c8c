# gpuarena build. One Makefile; each folder adds its targets through its own build.mk so the parts
# can be built and tested alone. Conventions for a build.mk:
#   ALL        += files `make` builds
#   TEST_TIERS += test-NAME   a phony target that writes $(RESULTS)/NAME.tap (TAP lines "ok"/"not ok")
#                             and exits 0 even when tests fail (the summary decides the exit code)
#   BENCHES    += bench-NAME  a phony target run by `make bench`
# `make test` installs missing Debian packages (scripts/setup.sh), builds, runs every tier (each
# announced as it starts, with its time), then prints one line "N passed, N failed" over all tiers.

CC       ?= cc
BUILD    ?= build
CUDA     ?= /usr/local/cuda
RESULTS  := $(BUILD)/results
SAN      ?=
OPT      ?= -O2
WARN     := -Wall -Wextra -Werror
EXTRA_CFLAGS ?=
CFLAGS_COMMON := -std=gnu11 $(OPT) -g -fPIC -fvisibility=hidden $(WARN) $(SAN) $(EXTRA_CFLAGS)
LDFLAGS_COMMON := $(SAN)
# Link-time optimisation for the preload library: its hooks, contexts and pools are small
# functions in separate files on every allocation's path, and inlining them across files took about
# 100 instructions off each free+alloc pair (`make bench-shim`). The allocator's objects stay
# usable without it (fat objects) for the tools and tests; sanitizer builds go without.
GA_LTO   := $(if $(SAN),,-flto=auto -ffat-lto-objects)
# The version: one line in VERSION, compiled into every C build (the shim's statistics, the tools).
VERSION  := $(shell cat VERSION 2>/dev/null || echo unknown)
CFLAGS_COMMON += -DGA_VERSION='"$(VERSION)"'
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

# The shared real traces (tests, benchmarks): beside the checkout unless GA_TRACES_DIR says where
# (a relative one from the checkout). Goals that replay them stop at once, saying so, where they are
# not: a clone elsewhere ran `make test` for minutes to fail 6 unit tests and most of cmd's, each
# saying "cannot open .../lifetimes" (an outside check, 2026-12-07).
GA_TRACES_DIR ?= $(CURDIR)/../shared/traces
override GA_TRACES_DIR := $(abspath $(GA_TRACES_DIR))
GA_TRACES_GOALS := test bench asan ubsan valgrind test-unit test-cmd bench-alloc bench-cmd
ifneq ($(filter $(GA_TRACES_GOALS),$(MAKECMDGOALS)),)
ifeq ($(wildcard $(GA_TRACES_DIR)/lifetimes),)
$(error gpuarena: no shared traces at $(GA_TRACES_DIR) (make $(filter $(GA_TRACES_GOALS),$(MAKECMDGOALS)) replays them): put the shared folder beside the checkout (../shared/traces) or name where it is: make $(filter $(GA_TRACES_GOALS),$(MAKECMDGOALS)) GA_TRACES_DIR=/path/to/shared/traces)
endif
endif

# Every C part includes the CUDA toolkit's cuda.h (headers only; no GPU, no driver needed): said
# with the fix before anything builds, not as a compiler's "cuda.h: No such file" (an outside
# check, 2026-12-06). Goals that build nothing go without.
GA_NO_CUDA_GOALS := help version clean uninstall deps
ifeq ($(wildcard $(CUDA)/include/cuda.h),)
ifneq ($(or $(filter-out $(GA_NO_CUDA_GOALS),$(MAKECMDGOALS)),$(if $(MAKECMDGOALS),,all)),)
$(error gpuarena: $(CUDA)/include/cuda.h not found: install the CUDA toolkit (its headers are enough: no GPU or driver is needed), or set CUDA=DIR to where it is (make CUDA=/opt/cuda ...))
endif
endif

# The build folder, checked before anything builds: in a read-only checkout `make demo` ended in
# mkdir's "cannot create directory 'build'" and make's errors (an outside check, 2026-12-07).
ifneq ($(or $(filter-out $(GA_NO_CUDA_GOALS),$(MAKECMDGOALS)),$(if $(MAKECMDGOALS),,all)),)
GA_BUILD_ERR := $(shell d='$(BUILD)'; while [ ! -e "$$d" ] && [ "$$d" != . ] && [ "$$d" != / ]; do \
	d=$$(dirname "$$d"); done; if [ ! -d "$$d" ]; then echo 'Not a directory'; \
	elif [ ! -w "$$d" ] && [ -n "$(filter-out install,$(MAKECMDGOALS))$(if $(MAKECMDGOALS),,all)" ]; \
	then echo 'Permission denied'; fi)
ifneq ($(strip $(GA_BUILD_ERR)),)
$(error gpuarena: cannot write the build folder $(abspath $(BUILD)) ($(strip $(GA_BUILD_ERR))): a read-only checkout? build elsewhere with make BUILD=DIR (make BUILD=$$HOME/gpuarena-build $(or $(MAKECMDGOALS),all)), and point the command at it with GPUARENA_BUILD=DIR)
endif
endif

# The toolkit's runtime, which two tests load (sim cuda_runtime_table, preload
# real_cudart_gets_hooks). Where it is not there (a toolkit of headers alone) they cannot run, and
# their TAP line is marked `# SKIP` with the reason, so the summary says so: they passed without
# a word until 2026-12-07, and the preload one looked only under /usr/local/cuda whatever CUDA said.
GA_CUDART := $(abspath $(CUDA))/lib64/libcudart.so.13
ga_skip_without_cudart = [ -r $(GA_CUDART) ] || [ ! -f $(RESULTS)/$(1).tap ] || sed -i '/^ok .*:$(2)\b/s|$$| \# SKIP no $(GA_CUDART) (the CUDA runtime; a toolkit of headers alone lacks it)|' $(RESULTS)/$(1).tap

ALL :=
TEST_TIERS :=
BENCHES :=

.PHONY: all build-all test bench deps clean asan ubsan tsan valgrind help version
# The default goal: missing packages first (the test binaries need Check, so a fresh machine's
# plain `make` failed at check.h), then everything. Targets that already ran deps build build-all.
all: deps
	@$(MAKE) --no-print-directory build-all

-include allocator/build.mk
-include test/sim/build.mk
-include shim/build.mk
-include test/unit/build.mk
-include test/preload/build.mk
-include test/bench/build.mk
-include examples/build.mk
-include scripts/build.mk
-include test/cmd/build.mk
-include test/fuzz/build.mk
-include test/stress/build.mk
-include test/group/build.mk

build-all: $(ALL)

# What the goals need of scripts/setup.sh's packages: where it cannot install them (a user, no
# apt-get) it stops only for one the goal needs; `make demo` for a user lacking valgrind stopped
# at once although the demo needs none of them (an outside check, 2026-12-07).
GA_GOALS := $(or $(MAKECMDGOALS),all)
GA_DEPS_FOR := $(if $(filter deps valgrind,$(GA_GOALS)),all,$(if $(filter test bench asan ubsan tsan,\
	$(GA_GOALS)),test,$(if $(filter-out demo,$(GA_GOALS)),build,demo)))
deps:
	@sh scripts/setup.sh $(GA_DEPS_FOR)

# The summary of `make test`: shown, not run, in a dry run (make -n runs the tier loop's line,
# which names $(MAKE), and the summary then read tiers that never ran: `make -n test` said
# "0 passed, 10 failed" and exited 2 until 2026-12-07, an outside check).
GA_SUMMARY = sh scripts/test-summary.sh $(RESULTS) $(patsubst test-%,%,$(TEST_TIERS))

test: deps
	@$(MAKE) --no-print-directory build-all
	@rm -rf $(RESULTS) && mkdir -p $(RESULTS)
	@start=$$(date +%s); for t in $(TEST_TIERS); do \
	  s=$$(date +%s); echo "== $${t#test-}: started $$(date +%H:%M:%S)"; \
	  $(MAKE) --no-print-directory $$t; \
	  echo "== $${t#test-}: finished in $$(( $$(date +%s) - s )) s"; done; \
	  echo "== every tier ran in $$(( $$(date +%s) - start )) s"; \
	  if [ -n "$(GA_DRY_RUN)" ]; then echo "$(GA_SUMMARY)"; else $(GA_SUMMARY); fi

bench: deps
	@$(MAKE) --no-print-directory build-all
	@$(MAKE) --no-print-directory $(BENCHES)

# Sanitizer builds go to their own build folder, so they never mix with the normal one. They run
# the C tiers (SAN_TIERS, test/stress/build.mk), tsan the stress and preload tiers; valgrind the unit tests.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan: deps
	@$(MAKE) --no-print-directory san-tiers BUILD=build-asan OPT=-O1 SAN="$(ASAN_FLAGS)"
ubsan: deps
	@$(MAKE) --no-print-directory san-tiers BUILD=build-ubsan OPT=-O1 SAN="-fsanitize=undefined -fno-sanitize-recover=all"
tsan: deps
	@$(MAKE) --no-print-directory san-tiers BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" SAN_TIERS="test-stress test-preload"
valgrind: deps
	@$(MAKE) --no-print-directory valgrind-unit BUILD=build-valgrind OPT=-O1

# $(BUILD), not build: `make BUILD=mine clean` removed the default folder another run may use and
# left its own (an outside check, 2026-12-06).
clean:
	rm -rf $(BUILD) build-asan build-ubsan build-tsan build-valgrind

version:
	@echo "gpuarena $(VERSION)"

# One line per target; the tiers and benchmarks are listed from what the build.mk files register.
help:
	@echo "gpuarena $(VERSION): make [VARIABLE=value ...] TARGET"
	@echo "  all (default)     install missing packages (deps), build the shim, gpuarena-replay,"
	@echo "                    the simulated driver, examples, tests (build-all: without deps)"
	@echo "  demo              run the examples under each mode on the simulated driver, one table"
	@echo "  test              install missing packages, build, run every tier, print N passed/failed"
	@for t in $(TEST_TIERS); do printf '  %-17s one test tier; TAP in $(RESULTS)/%s.tap\n' $$t $${t#test-}; done
	@echo "  bench             every benchmark (README tables come from them)"
	@for b in $(BENCHES); do printf '  %-17s one benchmark\n' $$b; done
	@echo "  fuzz-long         each fuzz target for FUZZ_LONG_TIME seconds, keeping its corpus"
	@echo "  asan, ubsan       the C tiers under AddressSanitizer+UBSan / UBSan (folder build-asan...)"
	@echo "  tsan              the stress and preload tiers under ThreadSanitizer (build-tsan)"
	@echo "  valgrind          the unit tests under valgrind (build-valgrind)"
	@echo "  install           install under PREFIX (default /usr/local; DESTDIR stages a package)"
	@echo "  uninstall         remove exactly what install put under PREFIX"
	@echo "  deps              install missing Debian packages (scripts/setup.sh)"
	@echo "  clean             remove the build folder (BUILD, default build) and the sanitizers' (build-asan, ...)"
	@echo "  version           print the version (the file VERSION)"
	@echo "  help              this list"
	@echo "variables: BUILD=DIR (build folder, default build), CC, CUDA (default /usr/local/cuda),"
	@echo "  PREFIX, DESTDIR, OPT (default -O2), FUZZ_TIME (seconds per fuzz target),"
	@echo "  GA_TRACES_DIR (the shared traces the tests replay, default ../shared/traces)"
