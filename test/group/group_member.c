/* group_member: one member of a group ledger, for the `gpuarena top` tests (test/cmd/test_top.py).
 *
 *   group_member DIR NAME UUID_HEX CAP COMMIT [IN_USE RESERVED PEAK MODE]
 *
 * Joins group NAME on the device with that UUID (32 hex digits) in DIR with cap CAP bytes, commits
 * COMMIT bytes, publishes the figures, prints "ready PID" and waits until its standard input
 * closes; then leaves the group and exits 0. A test that kills it instead leaves a dead member.
 * Errors: the library's message on stderr, exit 1.
 */
#include "ga_group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc != 6 && argc != 10) {
        fprintf(stderr, "usage: group_member DIR NAME UUID_HEX CAP COMMIT [IN_USE RESERVED PEAK MODE]\n");
        return 2;
    }
    uint8_t uuid[16];
    if (strlen(argv[3]) != 32) {
        fprintf(stderr, "group_member: UUID_HEX must be 32 hex digits\n");
        return 2;
    }
    for (int i = 0; i < 16; i++) {
        unsigned v;
        if (sscanf(argv[3] + 2 * i, "%2x", &v) != 1)
            return 2;
        uuid[i] = (uint8_t)v;
    }
    char err[512];
    ga_group_t *g = ga_group_open(argv[1], argv[2], uuid, strtoull(argv[4], NULL, 10), err, sizeof err);
    if (!g) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    if (!ga_group_commit(g, strtoull(argv[5], NULL, 10))) {
        fprintf(stderr, "group_member: commit of %s bytes refused by the cap\n", argv[5]);
        return 1;
    }
    if (argc == 10)
        ga_group_set_figures(g, strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10),
                             strtoull(argv[8], NULL, 10), argv[9]);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0)
        ;
    ga_group_close(g);
    return 0;
}
