/* Helpers shared by the libFuzzer targets in test/fuzz/.
 *
 * The readers under test take a path, not a buffer, so each input is written to an anonymous
 * memfd and handed over as /proc/self/fd/N: no file system litter, nothing to clean up when the
 * fuzzer is killed, and the reader goes through the same fopen/fread path as for a real file.
 * Writers (which go through PATH.tmp + rename) get a private directory made once per process.
 * A failed property aborts through FUZZ_CHECK so libFuzzer saves the input as a crash.
 */
#ifndef GA_FUZZ_UTIL_H
#define GA_FUZZ_UTIL_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Aborts with the failed condition: libFuzzer then records the input as a crash. */
#define FUZZ_CHECK(cond, what)                                                        \
    do {                                                                              \
        if (!(cond)) {                                                                \
            fprintf(stderr, "gpuarena fuzz: property failed: %s (%s) at %s:%d\n",     \
                    what, #cond, __FILE__, __LINE__);                                 \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* Writes data to a fresh memfd; fills path with its /proc/self/fd name. Returns the fd. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t pathlen)
{
    int fd = memfd_create("gpuarena-fuzz", 0);
    FUZZ_CHECK(fd >= 0, "memfd_create works (needs Linux >= 3.17)");
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        FUZZ_CHECK(w > 0, "writing the input to the memfd");
        off += (size_t)w;
    }
    snprintf(path, pathlen, "/proc/self/fd/%d", fd);
    return fd;
}

static char fuzz_dir[64];

/* Removes the scratch directory at exit; callers unlink their files after each input. */
static inline void fuzz_scratch_cleanup(void)
{
    if (fuzz_dir[0])
        rmdir(fuzz_dir);
}

/* A per-process scratch directory for writers that need a real path (rename needs one). */
static inline const char *fuzz_scratch_dir(void)
{
    if (!fuzz_dir[0]) {
        snprintf(fuzz_dir, sizeof fuzz_dir, "/tmp/gpuarena-fuzz-XXXXXX");
        FUZZ_CHECK(mkdtemp(fuzz_dir) != NULL, "mkdtemp in /tmp");
        atexit(fuzz_scratch_cleanup);
    }
    return fuzz_dir;
}

/* Reads a whole file into a malloc'd buffer (for comparing what a writer produced). */
static inline unsigned char *fuzz_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    FUZZ_CHECK(f != NULL, "the file just written can be opened");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
    FUZZ_CHECK(b != NULL, "host memory for the read-back");
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

#endif
