/* outfile_internal.h: what outfile.c (opening and writing an output file) and outfile_kind.c
 * (what a path is: its kind after following links, whether a file there is a trace or a report)
 * share. Only those two files include it; outfile.h is the interface to the rest of the shim.
 */
#ifndef GA_OUTFILE_INTERNAL_H
#define GA_OUTFILE_INTERNAL_H

#include "outfile.h"

#include <sys/stat.h>

typedef enum {
    GA_OUT_NEW,     /* nothing there yet: created atomically */
    GA_OUT_REGULAR, /* a regular file: replaced atomically */
    GA_OUT_THROUGH, /* a character device, a FIFO, or what a /proc fd link leads to: appended to */
    GA_OUT_OWN,     /* one of this process's own descriptors: written through a dup of it */
    GA_OUT_DIR,     /* refused */
    GA_OUT_OTHER,   /* a block device or a socket: refused */
    GA_OUT_PROGRAM, /* a regular file that is an ELF program or library: refused */
    GA_OUT_LEDGER,  /* a regular file that is a group's ledger (group_layout.h): refused */
    GA_OUT_TRACE,   /* a regular file that is a trace: a trace replaces it, statistics refuse it */
} ga_out_kind_t;

typedef struct ga_out {
    ga_out_kind_t kind;
    char target[GA_OUTFILE_PATH_MAX]; /* what to open, or to rename onto */
    struct stat st;                   /* of target when it exists; GA_OUT_OWN: of own_fd if open */
    int own_fd;                       /* GA_OUT_OWN: the descriptor's number; -1 otherwise */
    int own_err;                      /* GA_OUT_OWN: why fstat of it failed (EBADF: closed), or 0 */
} ga_out_t;

/* The digits at the start of s (no sign, no blanks) as *v: the first byte after them, or NULL when
 * s begins with no digit or the number does not fit. */
const char *ga_out_number(const char *s, unsigned long *v);
/* o as this process's descriptor fd: GA_OUT_OWN, or a directory's or another kind's refusal, from
 * fstat of fd alone; a closed descriptor leaves its errno in own_err. Returns 0. */
int ga_out_classify_own(int fd, ga_out_t *o);
/* What path is (ga_out_kind_t), symlinks followed one hop at a time: 0, or -1 with errno. */
int ga_out_classify(const char *path, ga_out_t *o);
/* Two paths name one file. */
int ga_out_same(const char *a, const char *b);
/* The regular file at path holds bytes that are not the start of a trace (1), or bytes this
 * process cannot read (2); 0 otherwise. */
int ga_out_not_a_trace(const char *path, const struct stat *st);
/* The same for a statistics report. */
int ga_out_not_a_report(const char *path, const struct stat *st);

#endif
