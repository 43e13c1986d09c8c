"""The name a misspelt one most likely means: one rule for the shim's unknown GPUARENA_* settings
(ga_closest_name in allocator/ga_names.h, which this follows word for word), `gpuarena doctor`'s
warnings about them and the command's unknown options (`--limt`: did you mean --limit?)."""


def edit_distance(a, b):
    """Edits from a to b, a swap of two neighbours counting as one (LMIIT, --mdoe)."""
    up2, up = None, list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            best = min(up[j - 1] + (a[i - 1] != b[j - 1]), up[j] + 1, cur[j - 1] + 1)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                best = min(best, up2[j - 2] + 1)
            cur[j] = best
        up2, up = up, cur
    return up[-1]


def closest(name, known, prefix, fold=True):
    """The name of `known` that `name` most likely means, or None. Compared after `prefix`
    (GPUARENA_, --), in capitals when `fold` (ASCII, as C's toupper: GPUARENA_mode means
    GPUARENA_MODE): near when the edit distance is at most a third of the shorter part (at least
    1), or one part holds the other and the shorter has 3 characters or more; the nearest wins,
    then the first in alphabetical order. Names of 64 characters or more get no suggestion, as in
    the shim."""
    if len(name) >= 64:
        return None
    up = (lambda s: "".join(c.upper() if "a" <= c <= "z" else c for c in s)) if fold else str
    t = up(name)[len(prefix):]
    best = None
    for k in known:
        kk = up(k)[len(prefix):]
        if len(t) >= 63 or len(kk) >= 63:
            continue
        d, shorter = edit_distance(t, kk), min(len(t), len(kk))
        near = d <= max(1, shorter // 3) or (shorter >= 3 and (kk in t or t in kk))
        if near and (best is None or (d, k) < best):
            best = (d, k)
    return best[1] if best else None
