/* gpuarena sizes: the one grammar for every size a user types (GPUARENA_LIMIT, GPUARENA_VMM_KEEP,
 * gpuarena-replay --limit/--arena-size, the simulated driver's SIMCUDA_TOTAL_MEM).
 *
 * Grammar: surrounding white space is ignored; a decimal number (digits, optionally a point and
 * more digits), optional white space, an optional unit, case-insensitive:
 *   B                        bytes
 *   K M G T, KiB MiB GiB TiB  x1024 (binary, as nvidia-smi, JAX and CUDA mean them)
 *   kB MB GB TB              x1000 (decimal)
 *   %                        a percentage (0 < p <= 100), only where the caller allows one
 * A fractional byte count is rounded down; a size that rounds to 0 bytes is refused, and so is one
 * above 2^64 - 1. Exponents (1e9), signs, hexadecimal, thousands separators and anything after the
 * unit are refused with a message that names the problem and the accepted forms. The arithmetic
 * is exact (integers, no floating point, no locale), so every parser of this grammar (the command's
 * Python one included, scripts/gpuarena_cli/fmt.py) gives the same bytes for the same text;
 * test/sizes.tsv is the shared table of cases. Pure C: no CUDA, no allocation.
 */
#ifndef GA_SIZE_H
#define GA_SIZE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ga_size_parse flags */
#define GA_SIZE_PERCENT 1u /* accept "50%" (a share of a device's memory) */
#define GA_SIZE_ZERO 2u    /* accept exactly 0 bytes ("0", "0B", "0.0GiB"): for counts of bytes
                           * where none is a value (GPUARENA_VMM_KEEP); "0.5" still rounds to
                           * nothing and is refused */

/* Digits after the point kept for a percentage (further ones are dropped): 1e-17 % of 16 EiB
 * is under one byte, and the exact fraction then fits 64 bits. */
#define GA_SIZE_PERCENT_DIGITS 17

typedef struct ga_size {
    int is_percent;
    uint64_t bytes;    /* !is_percent: the size, 1 .. 2^64 - 1 (0 only under GA_SIZE_ZERO) */
    double percent;    /* is_percent: (0, 100], for messages */
    uint64_t pct_num;  /* is_percent: the percentage exactly, pct_num / pct_den, */
    uint64_t pct_den;  /*   pct_den a power of ten */
} ga_size_t;

/* Parses text. Returns 0 and fills *out, or -1 with a message in err (when err is non-NULL) of
 * the form "'12XB' is not a size: unknown unit 'XB' (try 8GiB, ...)"; callers put the option's
 * name in front. */
int ga_size_parse(const char *text, unsigned flags, ga_size_t *out, char *err, size_t errlen);

/* Whether word alone is a unit of the grammar (any case) or %: what the shell leaves as a word of
 * its own from an unquoted "--limit 8 GiB" (gpuarena-replay says so; the command's twin is
 * fmt.is_unit). */
int ga_size_is_unit(const char *word);

/* text quoted as the messages quote a value: 'text', or for more than GA_SIZE_QUOTE_MAX characters
 * its head, its tail and its length, so a message stays whole in any buffer. */
#define GA_SIZE_QUOTE_MAX 64
void ga_size_quote(const char *text, char *out, size_t len);

/* v without the grammar's blanks around it (space, \t to \r: what every setting, size or not,
 * ignores around its value) copied into buf; NULL when it does not fit. The shim's settings and
 * the simulated driver's read their values through it. */
const char *ga_size_trim(const char *v, char *buf, size_t len);

/* floor(total * percent / 100) for a parsed percentage, exactly (0 when the share rounds to
 * nothing: callers refuse a zero cap). For a byte size, returns its bytes. */
uint64_t ga_size_percent_of(const ga_size_t *size, uint64_t total);

/* GPUARENA_MEM_FRACTION's grammar, one for the shim, gpuarena-replay --fraction and the command
 * (scripts/gpuarena_cli/settings.py): "0.75" (a fixed share of the cap) or "0.75+" (a share the
 * arena may grow past, up to the cap); 0 < F <= 1; plain decimals only (DIGITS, DIGITS.DIGITS or
 * .DIGITS), blanks around ignored; no exponent, sign or hexadecimal, and no locale. */
typedef struct ga_fraction {
    double value; /* F, rounded once as strtod would; a value under 10^-15 stays above 0 */
    int grow;     /* the text ended in '+' */
    char text[64]; /* the number as typed, without blanks or '+', for messages */
} ga_fraction_t;

/* 0 and *out filled, or -1 (nothing said: callers name the setting or option). */
int ga_fraction_parse(const char *text, ga_fraction_t *out);

/* The share of cap a fraction gives, as the shim sizes its arena: floor(cap * F) rounded down to
 * a multiple of align (a power of two), cap itself (so rounded) for F = 1. */
uint64_t ga_fraction_share(uint64_t cap, double value, uint64_t align);

#ifdef __cplusplus
}
#endif
#endif
