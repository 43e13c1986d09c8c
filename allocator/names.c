/* The known name a misspelt one most likely means (ga_names.h). */
#include "ga_names.h"

#include <string.h>

size_t ga_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), rows[3][64];
    if (la >= 63 || lb >= 63)
        return (size_t)-1;
    for (size_t j = 0; j <= lb; j++)
        rows[0][j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t *cur = rows[i % 3], *up = rows[(i - 1) % 3], *up2 = rows[(i + 1) % 3];
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t best = up[j - 1] + (a[i - 1] != b[j - 1]);
            if (up[j] + 1 < best)
                best = up[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            int swap = i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1];
            if (swap && up2[j - 2] + 1 < best)
                best = up2[j - 2] + 1;
            cur[j] = best;
        }
    }
    return rows[la % 3][lb];
}

/* s past its first skip characters, in capitals when fold, into buf[64]; NULL when too long. */
static const char *ga_names_part(const char *s, size_t skip, int fold, char *buf)
{
    size_t n = strlen(s);
    if (n >= 64)
        return NULL;
    s += skip < n ? skip : n;
    size_t i = 0;
    for (; s[i]; i++)
        buf[i] = fold && s[i] >= 'a' && s[i] <= 'z' ? (char)(s[i] - 'a' + 'A') : s[i];
    buf[i] = '\0';
    return buf;
}

const char *ga_closest_name(const char *typed, const char *const *known, size_t n, size_t skip,
                            int fold)
{
    char tb[64], kb[64];
    const char *t = ga_names_part(typed, skip, fold, tb), *best = NULL;
    size_t best_d = (size_t)-1;
    if (!t)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        const char *k = ga_names_part(known[i], skip, fold, kb);
        size_t d = k ? ga_edit_distance(t, k) : (size_t)-1;
        if (d == (size_t)-1)
            continue;
        size_t lt = strlen(t), lk = strlen(k), shorter = lt < lk ? lt : lk;
        int near = d <= (shorter / 3 > 1 ? shorter / 3 : 1) ||
                   (shorter >= 3 && (strstr(t, k) || strstr(k, t)));
        if (near && (d < best_d || (d == best_d && strcmp(known[i], best) < 0)))
            best_d = d, best = known[i];
    }
    return best;
}
