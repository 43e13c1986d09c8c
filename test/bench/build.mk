# test/bench/: allocator benchmarks. bench-alloc replays every lifetime CSV in ../shared/traces
# (plus any gpuarena trace in BENCH_TRACES) through the arena: ns per alloc/free, and the smallest
# region that runs each trace over its live peak, against best-fit and first-fit baselines.
# Prints a markdown table and writes $(BUILD)/bench/alloc.json. Always built with -O2.
BENCH_ALLOC := $(BUILD)/bin/bench-alloc
BENCH_TRACES ?=

ALL += $(BENCH_ALLOC)
BENCHES += bench-alloc

$(BENCH_ALLOC): test/bench/bench_alloc.c allocator/ga_replay.h allocator/ga_trace.h \
		allocator/ga_arena.h $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O2 -Iallocator -o $@ test/bench/bench_alloc.c \
		$(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON)

.PHONY: bench-alloc
bench-alloc: $(BENCH_ALLOC)
	@mkdir -p $(BUILD)/bench
	@GA_TRACES_DIR=$(CURDIR)/../shared/traces ./$(BENCH_ALLOC) $(BUILD)/bench/alloc.json \
		$(BENCH_TRACES)
