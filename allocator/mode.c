/* gpuarena mode names (ga_pool.h, GA_MODE_LIST): the only spelling of a mode anywhere. A file of
 * its own so that the shim's option parser can be built alone (the options fuzz target).
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "ga_pool.h"

static const struct {
    const char *name, *desc;
} ga_modes[GA_MODE_COUNT] = {
#define GA_MODE_ROW(sym, name, desc) {name, desc},
    GA_MODE_LIST(GA_MODE_ROW)
#undef GA_MODE_ROW
};

const char *ga_mode_name(ga_mode_t m)
{
    return (unsigned)m < GA_MODE_COUNT ? ga_modes[m].name : "invalid";
}

const char *ga_mode_desc(ga_mode_t m)
{
    return (unsigned)m < GA_MODE_COUNT ? ga_modes[m].desc : "";
}

int ga_mode_parse(const char *text, ga_mode_t *mode)
{
    if (!text || !mode)
        return -1;
    while (isspace((unsigned char)*text))
        text++;
    size_t n = strlen(text);
    while (n && isspace((unsigned char)text[n - 1]))
        n--;
    for (unsigned i = 0; i < GA_MODE_COUNT; i++)
        if (strlen(ga_modes[i].name) == n && !strncasecmp(text, ga_modes[i].name, n)) {
            *mode = (ga_mode_t)i;
            return 0;
        }
    return -1;
}

