# allocator/: every allocator/*.c (arena core, regions, checks, and the trace/replay files)
# goes into one static library, position-independent so the preload shim can link it into a .so.
ALLOC_SRC := $(wildcard allocator/*.c)
ALLOC_OBJ := $(ALLOC_SRC:%.c=$(BUILD)/obj/%.o)
ALLOC_LIB := $(BUILD)/lib/libgaalloc.a

ALL += $(ALLOC_LIB)

$(BUILD)/obj/allocator/%.o: allocator/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(GA_LTO) -Iallocator -MMD -MP -c $< -o $@

$(ALLOC_LIB): $(ALLOC_OBJ)
	@mkdir -p $(@D)
	rm -f $@ && ar rcs $@ $^

-include $(ALLOC_OBJ:.o=.d)
