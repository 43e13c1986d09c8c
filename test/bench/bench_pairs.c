/* bench-pairs: one size freed and allocated again, at the pool, in any mode, for instruction counts.
 *
 *   bench-pairs MODE SIZE PAIRS [LIVE]
 * makes a pool of MODE (arena: a 64 GiB first region; vmm: a 64 GiB first range of 2 MiB granules,
 * the default keep) on a host backend that hands out address space only, allocates LIVE blocks of
 * SIZE bytes (16 unless said; 1 to 64), then PAIRS times frees block i % LIVE and allocates SIZE
 * again in its place. After the first round nothing is mapped or reserved any more in either mode
 * (the freed granules stay kept in vmm mode while the keep has room for them): the loop is the cost
 * of an allocation and a free that map nothing. scripts/bench-pool-instr.sh counts its
 * instructions per pair under callgrind (two runs of different length, their difference); the
 * program itself only runs the loop and says how much memory the pool held at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ga_pool.h"
#include "host_backend.h"
#include "ga_size.h"

int main(int argc, char **argv)
{
    static const char usage[] = "usage: bench-pairs arena|vmm SIZE PAIRS [LIVE]\n"
                                "  LIVE blocks of SIZE (a size: 4096, 3MiB, ...; 16 blocks unless\n"
                                "  said, 1-64), each freed and\n"
                                "  allocated again in turn, PAIRS times in all, at the pool\n";
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        fputs(usage, stdout);
        return 0;
    }
    ga_mode_t mode;
    char *e2 = NULL, *e3 = NULL;
    const char *why = NULL;
    size_t size = 0;
    long pairs = 0, live = 16;
    if (argc < 4 || argc > 5) {
        why = "MODE, SIZE and PAIRS are needed";
    } else if (ga_mode_parse(argv[1], &mode) != 0 ||
               (mode != GA_MODE_ARENA && mode != GA_MODE_VMM)) {
        why = "MODE is arena or vmm";
    } else {
        ga_size_t sz;
        char err[200];
        pairs = strtol(argv[3], &e2, 10);
        if (argc > 4)
            live = strtol(argv[4], &e3, 10);
        if (ga_size_parse(argv[2], 0, &sz, err, sizeof err) != 0) {
            fprintf(stderr, "gpuarena: bench-pairs: SIZE: %s\n%s", err, usage);
            return 2;
        }
        size = (size_t)sz.bytes;
        if (size > ((size_t)1 << 32))
            why = "SIZE is from 1 byte to 4 GiB";
        else if (*e2 || pairs < 0 || e2 == argv[3])
            why = "PAIRS is a count, 0 or more";
        else if ((e3 && (*e3 || e3 == argv[4])) || live < 1 || live > 64)
            why = "LIVE is a count from 1 to 64";
    }
    if (why) {
        fprintf(stderr, "gpuarena: bench-pairs: %s\n%s", why, usage);
        return 2;
    }
    ga_pool_backend_t be = hb_backend();
    ga_pool_config_t cfg = {.mode = mode, .grow = 1, .keep = GA_VMM_KEEP_DEFAULT};
    if (mode == GA_MODE_VMM)
        cfg.va_size = (size_t)1 << 36;
    else
        cfg.initial = (size_t)1 << 36;
    ga_status_t st = GA_OK;
    ga_pool_t *pool = ga_pool_create(&be, &cfg, &st);
    if (!pool) {
        fprintf(stderr, "gpuarena: bench-pairs: no pool (status %d)\n", (int)st);
        return 1;
    }
    uintptr_t block[64];
    for (long i = 0; i < live; i++)
        if (ga_pool_alloc(pool, size, &block[i]) != GA_OK) {
            fprintf(stderr, "gpuarena: bench-pairs: the first %ld blocks do not fit\n", live);
            return 1;
        }
    for (long i = 0; i < pairs; i++) {
        int k = (int)(i % live);
        if (ga_pool_free(pool, block[k], NULL) != GA_OK ||
            ga_pool_alloc(pool, size, &block[k]) != GA_OK) {
            fprintf(stderr, "gpuarena: bench-pairs: pair %ld failed\n", i);
            return 1;
        }
    }
    ga_stats_t s;
    ga_pool_stats(pool, &s);
    printf("%s %zu x %ld: %llu bytes held, %llu backend maps\n", argv[1], size, live,
           (unsigned long long)s.reserved, (unsigned long long)s.backend_maps);
    ga_pool_destroy(pool);
    return 0;
}
