# scripts/: the C tool behind `gpuarena replay`. It links the allocator library only (no CUDA),
# so it builds and runs on any machine.
REPLAY_TOOL := $(BUILD)/bin/gpuarena-replay

ALL += $(REPLAY_TOOL)

$(REPLAY_TOOL): scripts/replay_main.c allocator/ga_replay.h allocator/ga_trace.h \
		allocator/ga_arena.h $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Iallocator -o $@ scripts/replay_main.c $(BUILD)/lib/libgaalloc.a \
		$(LDFLAGS_COMMON)
