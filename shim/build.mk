# shim/: the preload library $(BUILD)/lib/libgpuarena.so. Its version script and the list of
# exported names are generated from shim/hooks.def by the C preprocessor, so the hook list exists
# once; the allocator library is linked in (position-independent, hidden symbols).
SHIM_SRC := $(wildcard shim/*.c)
SHIM_OBJ := $(SHIM_SRC:%.c=$(BUILD)/obj/%.o)
SHIM_LIB := $(BUILD)/lib/libgpuarena.so
# The group ledger's objects compiled apart from the shim's (no -fvisibility, no CUDA), for the
# test tiers that link the ledger alone (test/group, test/unit); defined here because
# test/unit/build.mk is read before test/group/build.mk, which has their rule.
GROUP_OBJ := $(BUILD)/obj/group/group.o $(BUILD)/obj/group/group_join.o $(BUILD)/obj/group/group_host.o
SHIM_MAP := $(BUILD)/gen/libgpuarena.map
SHIM_HOOK_NAMES := $(BUILD)/gen/hooks.txt

ALL += $(SHIM_LIB) $(SHIM_HOOK_NAMES)

# initial-exec TLS: the shim is preloaded (in the initial set of libraries), so its thread-locals
# live in static TLS and cost one instruction instead of a __tls_get_addr call (7 ns per hook,
# bench-shim); glibc's surplus static TLS still covers a late dlopen of the shim.
$(BUILD)/obj/shim/%.o: shim/%.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_COMMON) $(GA_LTO) -ftls-model=initial-exec -I$(CUDA)/include -MMD -MP -c $< -o $@

$(SHIM_MAP): shim/exports.map.in shim/hooks.def
	@mkdir -p $(@D)
	$(CC) -E -P -x c -Ishim $< -o $@

# One exported name per line, sorted: what `nm -D --defined-only` must show, no more, no less.
$(SHIM_HOOK_NAMES): shim/hooks.def
	@mkdir -p $(@D)
	printf '#define GA_HOOK(lib, name, ...) name\n#include "hooks.def"\n' | \
	  $(CC) -E -P -x c -Ishim - | grep -v '^ *$$' | LC_ALL=C sort > $@

# -z nodelete: a program that dlopens the shim (ctypes.CDLL) and dlcloses it must not unmap it, since
# its trace's thread-key destructor and its fork handlers stay registered with glibc: the next
# thread that had traced died at its exit in unmapped code (helper-43 F8).
$(SHIM_LIB): $(SHIM_OBJ) $(SHIM_MAP) $(BUILD)/lib/libgaalloc.a
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libgpuarena.so -Wl,--version-script=$(SHIM_MAP) -Wl,-z,defs -Wl,-z,nodelete \
	  $(LDFLAGS_COMMON) $(if $(GA_LTO),-flto=auto $(OPT)) -o $@ $(SHIM_OBJ) $(BUILD)/lib/libgaalloc.a \
	  -ldl -lpthread -lm

-include $(SHIM_OBJ:.o=.d)
