# scripts/: the C tool behind `gpuarena replay` (it links the allocator library only, no CUDA, so it
# builds and runs on any machine), and `make install` / `make uninstall` (scripts/install.sh says
# what goes where; PREFIX defaults to /usr/local, DESTDIR stages a package).
REPLAY_TOOL := $(BUILD)/bin/gpuarena-replay
PREFIX ?= /usr/local
DESTDIR ?=

ALL += $(REPLAY_TOOL)

$(REPLAY_TOOL): scripts/replay_main.c scripts/replay_args.c scripts/replay_args.h \
		allocator/ga_replay.h allocator/ga_trace.h \
		allocator/ga_arena.h allocator/ga_size.h allocator/ga_names.h $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) -Iallocator -o $@ scripts/replay_main.c scripts/replay_args.c \
		$(BUILD)/lib/libgaalloc.a \
		$(LDFLAGS_COMMON)

.PHONY: install uninstall
install: $(BUILD)/lib/libgpuarena.so $(REPLAY_TOOL) $(BUILD)/sim/libcuda.so.1
	@sh scripts/install.sh install $(BUILD) "$(PREFIX)" "$(DESTDIR)"

uninstall:
	@sh scripts/install.sh uninstall $(BUILD) "$(PREFIX)" "$(DESTDIR)"
