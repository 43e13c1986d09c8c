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
CHECK_CFLAGS = $(shell pkg-config --cflags check 2>/dev/null)
CHECK_LIBS   = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lm -lrt -lpthread)

ALL :=
TEST_TIERS :=
BENCHES :=

.PHONY: all test bench deps clean asan ubsan tsan valgrind
all:

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

all: $(ALL)

deps:
	@sh scripts/setup.sh

test: deps
	@$(MAKE) --no-print-directory all
	@rm -rf $(RESULTS) && mkdir -p $(RESULTS)
	@start=$$(date +%s); for t in $(TEST_TIERS); do \
	  s=$$(date +%s); echo "== $${t#test-}: started $$(date +%H:%M:%S)"; \
	  $(MAKE) --no-print-directory $$t; \
	  echo "== $${t#test-}: finished in $$(( $$(date +%s) - s )) s"; done; \
	  echo "== every tier ran in $$(( $$(date +%s) - start )) s"; \
	  sh scripts/test-summary.sh $(RESULTS) $(patsubst test-%,%,$(TEST_TIERS))

bench: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory $(BENCHES)

# Sanitizer builds go to their own build folder, so they never mix with the normal one. They run
# the C tiers (SAN_TIERS, test/stress/build.mk), tsan only the stress tier; valgrind the unit tests.
ASAN_FLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
asan: deps
	@$(MAKE) --no-print-directory san-tiers BUILD=build-asan OPT=-O1 SAN="$(ASAN_FLAGS)"
ubsan: deps
	@$(MAKE) --no-print-directory san-tiers BUILD=build-ubsan OPT=-O1 SAN="-fsanitize=undefined -fno-sanitize-recover=all"
tsan: deps
	@$(MAKE) --no-print-directory san-tiers BUILD=build-tsan OPT=-O1 SAN="-fsanitize=thread" SAN_TIERS=test-stress
valgrind: deps
	@$(MAKE) --no-print-directory valgrind-unit BUILD=build-valgrind OPT=-O1

clean:
	rm -rf build build-asan build-ubsan build-tsan build-valgrind
