/* gpuarena allocator: the one error-message helper the readers and replay share.
 *
 * Readers report failures as text in a caller's buffer rather than on stderr, so the shim, the
 * command-line tools and the tests each decide where a message goes.
 */
#ifndef GA_ERRMSG_H
#define GA_ERRMSG_H

#include <stddef.h>

/* snprintf into err when the caller gave a buffer; always returns -1 so callers can return it. */
int ga_errorf(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* What to do when an input could not be opened for the errno e: "cannot open t.gatrace: No such
 * file or directory" said the reason alone (an outside check, helper-119). */
const char *ga_open_hint(int e);

#endif
