# test/bench/: allocator benchmarks.
# bench-alloc replays every lifetime CSV in ../shared/traces (plus any gpuarena trace in
# BENCH_TRACES) through the arena: ns per alloc/free, and the smallest region that runs each trace
# over its live peak, against best-fit and first-fit baselines. Prints a markdown table and writes
# $(BUILD)/bench/alloc.json.
# bench-scale times one alloc+free pair and one interior lookup with 100 to 1,000,000 free holes
# (one size, mixed sizes) and the ratio to 100 holes; writes $(BUILD)/bench/scale.json.
# BENCH_SCALE_ARGS="MAX_HOLES PAIRS" shortens it. Both are always built with -O2.
BENCH_ALLOC := $(BUILD)/bin/bench-alloc
BENCH_SCALE := $(BUILD)/bin/bench-scale
# bench-pairs: one size freed and allocated again at the pool (arena or vmm), for
# scripts/bench-pool-instr.sh's instruction counts (not part of make bench: it times nothing).
BENCH_PAIRS := $(BUILD)/bin/bench-pairs
BENCH_TRACES ?=
BENCH_SCALE_ARGS ?=

ALL += $(BENCH_ALLOC) $(BENCH_SCALE) $(BENCH_PAIRS)
BENCHES += bench-alloc bench-scale

$(BENCH_ALLOC): test/bench/bench_alloc.c allocator/ga_replay.h allocator/ga_trace.h \
		allocator/ga_arena.h $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O2 -Iallocator -o $@ test/bench/bench_alloc.c \
		$(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON)

$(BENCH_PAIRS): test/bench/bench_pairs.c test/bench/host_backend.h allocator/ga_pool.h \
		$(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O2 -Iallocator -o $@ test/bench/bench_pairs.c \
		$(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON)

$(BENCH_SCALE): test/bench/bench_scale.c allocator/ga_arena.h $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O2 -Iallocator -o $@ test/bench/bench_scale.c \
		$(BUILD)/lib/libgaalloc.a $(LDFLAGS_COMMON)

.PHONY: bench-alloc bench-scale
bench-alloc: $(BENCH_ALLOC)
	@mkdir -p $(BUILD)/bench
	@GA_TRACES_DIR=$(GA_TRACES_DIR) $(abspath $(BENCH_ALLOC)) $(BUILD)/bench/alloc.json \
		$(BENCH_TRACES)

bench-scale: $(BENCH_SCALE)
	@mkdir -p $(BUILD)/bench
	@$(abspath $(BENCH_SCALE)) $(BUILD)/bench/scale.json $(BENCH_SCALE_ARGS)

# bench-free: the cost of safe reuse per GPUARENA_FREE_SYNC choice, and gpuarena's stream-ordered
# pool against the driver's own, under the shim on the simulated driver (markdown table).
BENCH_FREE := $(BUILD)/bin/bench-free
ALL += $(BENCH_FREE)
BENCHES += bench-free

$(BENCH_FREE): test/bench/bench_free.c $(BUILD)/sim/libcuda.so
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O2 -I$(CUDA)/include -Itest/sim -o $@ test/bench/bench_free.c \
		-L$(BUILD)/sim -lcuda $(LDFLAGS_COMMON)

.PHONY: bench-free
bench-free: $(BENCH_FREE) $(SHIM_LIB)
	@LD_LIBRARY_PATH=$(BUILD)/sim $(abspath $(BENCH_FREE)) $(abspath $(SHIM_LIB)) $(abspath $(BUILD)/sim) $(BENCH_FREE_PAIRS)

# bench-patterns: allocation patterns (one buffer again, sizes alternating, a training step, ...)
# at the pool or through the shim, for scripts/bench-patterns-instr.sh's instruction counts,
# arena against vmm (helper-136). Linked to its own null driver (bench_nulldrv_streams.c: the
# preload benchmarks' null driver plus streams, events, async and pitched allocation).
BENCH_PATTERNS := $(BUILD)/bin/bench-patterns
BENCH_NULLDRV_S := $(BUILD)/bench/nulldrv/libcuda.so.1
ALL += $(BENCH_PATTERNS) $(BENCH_NULLDRV_S)

$(BENCH_NULLDRV_S): test/bench/bench_nulldrv_streams.c test/preload/bench_nulldrv.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -I$(CUDA)/include -shared -Wl,-soname,libcuda.so.1 -Wl,-Bsymbolic \
	  -o $@ $< $(LDFLAGS_COMMON)

$(BENCH_PATTERNS): test/bench/bench_patterns.c test/bench/host_backend.h allocator/ga_pool.h \
		$(BUILD)/lib/libgaalloc.a \
		$(BENCH_NULLDRV_S)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -O2 -I$(CUDA)/include -Iallocator -o $@ test/bench/bench_patterns.c \
		$(BUILD)/lib/libgaalloc.a -L$(BUILD)/bench/nulldrv -l:libcuda.so.1 $(LDFLAGS_COMMON)
