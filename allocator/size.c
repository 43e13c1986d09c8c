/* gpuarena sizes: the parser of the grammar described in ga_size.h.
 *
 * The text is scanned once into its parts (whole digits, fraction digits, unit) and the value is
 * computed from the digits with integers only: the whole part with an overflow check, the fraction
 * by Horner's rule from its last digit keeping floor values (floor((a + x) / 10) equals
 * floor((a + floor(x)) / 10) for an integer a), so "1.0000000001GiB" gives the exact rounded-down
 * byte count for any number of digits. No strtod: it would round through a double and read "1,5"
 * as a number under a German locale that a preloaded program may have set. Every refusal names
 * what is wrong and the accepted forms, in the same words as the command's Python parser.
 */
#include "ga_size.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef unsigned __int128 ga_u128;

static const struct {
    const char *name; /* lower case */
    uint64_t mult;
} units[] = {
    {"b", 1},
    {"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
    {"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
    {"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
    {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
};

/* ASCII only, on purpose: the C library's versions follow the program's locale. */
static int is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
static char to_lower(char c) { return (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c); }

/* The parts of a size, as pointers into the text. */
typedef struct scan {
    const char *whole, *frac, *unit;
    size_t nwhole, nfrac, nunit; /* nunit 0: no unit */
    int percent;
} scan_t;

/* Writes "why" (printf-style) into why; always returns -1. */
static int why_f(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int why_f(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return -1;
}

/* What may not start a number, and what may not follow one, each with its own explanation. */
static int scan_number(const char **pp, scan_t *s, char *why, size_t len)
{
    const char *p = *pp;
    if (!*p)
        return why_f(why, len, "nothing given");
    if (*p == '-' || *p == '+')
        return why_f(why, len, "signs are not accepted");
    if (*p == '.')
        return why_f(why, len, "write a digit before the point: 0.5, not .5");
    if (!is_digit(*p))
        return why_f(why, len, "it does not start with a number");
    for (s->whole = p; is_digit(*p); p++)
        ;
    s->nwhole = (size_t)(p - s->whole);
    s->frac = p;
    if (*p == '.') {
        for (s->frac = ++p; is_digit(*p); p++)
            ;
        s->nfrac = (size_t)(p - s->frac);
        if (!s->nfrac)
            return why_f(why, len, "write a digit after the point: 5.0, not 5.");
    }
    if ((*p == 'e' || *p == 'E') && (is_digit(p[1]) || p[1] == '-' || p[1] == '+'))
        return why_f(why, len, "exponents are not accepted: write the number out, as 1000 or 1GB, not 1e3 or 1e9");
    if ((*p == 'x' || *p == 'X') && s->nwhole == 1 && *s->whole == '0' && !s->nfrac)
        return why_f(why, len, "hexadecimal is not accepted");
    if (*p == ',' && is_digit(p[1]))
        return why_f(why, len, "commas are not accepted: write 1.5 or 1000000");
    *pp = p;
    return 0;
}

static int scan(const char *text, scan_t *s, char *why, size_t len)
{
    const char *p = text;
    memset(s, 0, sizeof *s);
    while (is_space(*p))
        p++;
    if (scan_number(&p, s, why, len) != 0)
        return -1;
    while (is_space(*p))
        p++;
    s->unit = p;
    if (*p == '%')
        p++, s->percent = 1;
    else
        while (is_alpha(*p))
            p++;
    s->nunit = (size_t)(p - s->unit);
    while (is_space(*p))
        p++;
    if (*p) {
        /* A no-break space (copied from a web page) looks like a space and is not one: said, or
         * the message read as if spaces were refused (helper-67 F17.4). */
        int wide = 0;
        for (const char *q = p; *q; q++)
            wide |= (unsigned char)*q >= 0x80;
        return why_f(why, len, "unexpected '%s' after the %s%s", p, s->nunit ? "unit" : "number",
                     wide ? " (a character that is not ASCII, such as a no-break space: write the "
                            "size with plain spaces)" : "");
    }
    return 0;
}

/* Multiplier of the unit (1 without one), 0 when unknown. */
static uint64_t unit_mult(const scan_t *s)
{
    char name[4];
    if (!s->nunit)
        return 1;
    if (s->nunit >= sizeof name)
        return 0;
    for (size_t i = 0; i < s->nunit; i++)
        name[i] = to_lower(s->unit[i]);
    name[s->nunit] = '\0';
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(name, units[i].name))
            return units[i].mult;
    return 0;
}

int ga_size_is_unit(const char *word)
{
    scan_t s = {.unit = word, .nunit = word ? strlen(word) : 0};
    return word && (!strcmp(word, "%") || (s.nunit && unit_mult(&s) != 0));
}

/* The whole digits as a number; -1 when above 2^64 - 1. */
static int whole_value(const scan_t *s, uint64_t *out)
{
    uint64_t v = 0;
    for (size_t i = 0; i < s->nwhole; i++) {
        unsigned d = (unsigned)(s->whole[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* floor(0.DIGITS * mult), exactly, for any number of digits (see the top of the file). */
static ga_u128 frac_times(const char *digits, size_t n, ga_u128 mult)
{
    ga_u128 x = 0;
    for (size_t i = n; i-- > 0;)
        x = ((ga_u128)(unsigned)(digits[i] - '0') * mult + x) / 10;
    return x;
}

static int all_zero(const char *digits, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (digits[i] != '0')
            return 0;
    return 1;
}

static int to_bytes(const scan_t *s, uint64_t mult, unsigned flags, ga_size_t *out, char *why,
                    size_t len)
{
    uint64_t whole = 0;
    int big = whole_value(s, &whole) != 0;
    ga_u128 b = big ? 0 : (ga_u128)whole * mult + frac_times(s->frac, s->nfrac, mult);
    if (big || b > UINT64_MAX)
        return why_f(why, len, "it is more than 2^64 - 1 bytes");
    int exact_zero = b == 0 && whole == 0 && all_zero(s->frac, s->nfrac);
    if (b == 0 && !(exact_zero && (flags & GA_SIZE_ZERO)))
        return why_f(why, len, exact_zero ? "it is 0 bytes"
                               : (flags & GA_SIZE_ZERO) ? "it rounds down to 0 bytes; write 0 for none"
                                                        : "it rounds down to 0 bytes");
    memset(out, 0, sizeof *out);
    out->bytes = (uint64_t)b;
    return 0;
}

static int to_percent(const scan_t *s, ga_size_t *out, char *why, size_t len)
{
    uint64_t whole, den = 1, num;
    size_t keep = s->nfrac < GA_SIZE_PERCENT_DIGITS ? s->nfrac : GA_SIZE_PERCENT_DIGITS;
    if (whole_value(s, &whole) != 0 || whole > 100)
        return why_f(why, len, "a percentage must be more than 0 and at most 100");
    num = whole;
    for (size_t i = 0; i < keep; i++, den *= 10)
        num = num * 10 + (uint64_t)(s->frac[i] - '0');
    if (num == 0 || (whole == 100 && !all_zero(s->frac, s->nfrac)))
        return why_f(why, len, "a percentage must be more than 0 and at most 100");
    memset(out, 0, sizeof *out);
    out->is_percent = 1;
    out->pct_num = num;
    out->pct_den = den;
    out->percent = (double)num / (double)den;
    return 0;
}

/* Whole, or head, tail and length (ga_size.h): a value of 5,000 digits filled the caller's buffer,
 * and the message said neither what was wrong nor what is accepted. */
void ga_size_quote(const char *text, char *out, size_t len)
{
    size_t n = strlen(text);
    if (n <= GA_SIZE_QUOTE_MAX)
        snprintf(out, len, "'%s'", text);
    else
        snprintf(out, len, "'%.32s...%s' (%zu characters)", text, text + n - 16, n);
}

int ga_size_parse(const char *text, unsigned flags, ga_size_t *out, char *err, size_t errlen)
{
    char quoted[GA_SIZE_QUOTE_MAX + 48];
    char why[160];
    scan_t s;
    int rc = -1;
    uint64_t mult = 0;
    if (!text || !out)
        why_f(why, sizeof why, "nothing given");
    else if (scan(text, &s, why, sizeof why) != 0)
        ;
    else if (s.percent && !(flags & GA_SIZE_PERCENT))
        why_f(why, sizeof why, "a percentage is not accepted here");
    else if (s.percent)
        rc = to_percent(&s, out, why, sizeof why);
    else if ((mult = unit_mult(&s)) == 0)
        why_f(why, sizeof why, "unknown unit '%.*s'", (int)s.nunit, s.unit);
    else
        rc = to_bytes(&s, mult, flags, out, why, sizeof why);
    if (rc != 0 && err && errlen) {
        ga_size_quote(text ? text : "", quoted, sizeof quoted);
        snprintf(err, errlen,
                 "%s is not a size: %s (try 8GiB, 512MiB, 1.5G, 4096%s; units B, K/KiB, M/MiB, "
                 "G/GiB, T/TiB = x1024, kB, MB, GB, TB = x1000, in any case)",
                 quoted, why, (flags & GA_SIZE_PERCENT) ? " or 50%" : "");
    }
    return rc;
}

uint64_t ga_size_percent_of(const ga_size_t *size, uint64_t total)
{
    if (!size->is_percent)
        return size->bytes;
    /* total * num < 2^128 and 100 * den <= 10^19 < 2^64: no overflow. */
    return (uint64_t)((ga_u128)total * size->pct_num / ((ga_u128)size->pct_den * 100));
}

const char *ga_size_trim(const char *v, char *buf, size_t len)
{
    while (is_space(*v))
        v++;
    size_t n = strlen(v);
    while (n && is_space(v[n - 1]))
        n--;
    if (n >= len)
        return NULL;
    memcpy(buf, v, n);
    buf[n] = '\0';
    return buf;
}

/* The shim's parse_fraction, moved here so that gpuarena-replay --fraction reads the same text
 * the same way. strtod took hex floats and exponents the command refuses, and would read "0.75"
 * by the program's LC_NUMERIC: digits are read by hand. */
int ga_fraction_parse(const char *raw, ga_fraction_t *out)
{
    if (!raw)
        return -1;
    /* Blanks trimmed in place: a fraction of any length is read, as a size is (a 64-byte copy
     * refused 0.75 followed by 70 zeros, which the command took). */
    const char *v = raw;
    while (is_space(*v))
        v++;
    size_t n = strlen(v), i = 0, before = 0, after = 0;
    while (n && is_space(v[n - 1]))
        n--;
    int grow = n && v[n - 1] == '+';
    n -= (size_t)grow;
    uint64_t whole = 0, mant = 0, pow10 = 1;
    int tail = 0; /* a non-zero digit past the 15 kept */
    for (; i < n && is_digit(v[i]); i++, before++)
        whole = whole > 1 ? whole : whole * 10 + (uint64_t)(v[i] - '0'); /* past 1: too large */
    if (i < n && v[i] == '.') {
        for (i++; i < n && is_digit(v[i]); i++, after++) {
            if (after < 15) { /* 15 digits: the integer and 10^15 are exact in a double */
                mant = mant * 10 + (uint64_t)(v[i] - '0');
                pow10 *= 10;
            } else {
                tail |= v[i] != '0';
            }
        }
    }
    if (!n || i != n || (!before && !after) || v[i - 1] == '.')
        return -1;
    if (whole > 1 || (whole == 1 && (mant || tail)) || (!whole && !mant && !tail))
        return -1; /* outside (0, 1], exactly as the command's Fraction reads it */
    /* One division of exact doubles rounds as strtod would: 0.75 is 0.75, not 0.7 + 0.05. A value
     * below 10^-15 stays above 0 (its share of any cap rounds to nothing, refused as such). */
    out->value = whole ? 1.0 : mant ? (double)mant / (double)pow10 : 1e-300;
    out->grow = grow;
    if (n < sizeof out->text) /* as typed; a long one by its head, its tail and its length */
        snprintf(out->text, sizeof out->text, "%.*s", (int)n, v);
    else
        snprintf(out->text, sizeof out->text, "%.16s...%.8s (%zu characters)", v, v + n - 8, n);
    return 0;
}

uint64_t ga_fraction_share(uint64_t cap, double value, uint64_t align)
{
    double share = (double)cap * value;
    if (share >= (double)cap)
        return cap & ~(align - 1);
    return (uint64_t)share & ~(align - 1);
}
