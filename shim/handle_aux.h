/* gpuarena: the aux word of a cuMemCreate handle's record in its device's pass-through table
 * (passthrough.c records a handle when it is made; handles.c counts its references and mappings).
 * Nothing but those two files includes this header. */
#ifndef GA_HANDLE_AUX_H
#define GA_HANDLE_AUX_H

/* A handle's aux in the device's table: the entry point, its references (cuMemCreate and each
 * cuMemRetainAllocationHandle, less each cuMemRelease) and its live mappings. */
#define GA_HANDLE_AUX(api, refs, maps) \
    ((uint64_t)(api) | (uint64_t)(refs) << 8 | (uint64_t)(maps) << 32)
#define GA_HANDLE_API(aux) ((uint8_t)((aux) & 0xff))
#define GA_HANDLE_REFS_MAX 0xffffffull
#define GA_HANDLE_REFS(aux) (((aux) >> 8) & GA_HANDLE_REFS_MAX)
#define GA_HANDLE_MAPS(aux) ((aux) >> 32)

#endif
