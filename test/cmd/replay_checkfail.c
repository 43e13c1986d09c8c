/* replay_checkfail: gpuarena-replay (scripts/replay_main.c and replay_args.c, unchanged) linked with
 * -Wl,--wrap=ga_replay, so that a replay with the check option in vmm mode reports 2 invariant
 * failures. The checker never fails on correct code; this lets test_replay.py see what the tool
 * does when it does (exit 1 after its output, a gpuarena: line on stderr) without a test-only
 * switch in the allocator. */
#include "ga_replay.h"

#include <stdint.h>
#include <stdio.h>

int __real_ga_replay(const ga_trace_t *t, const ga_replay_opts_t *o, ga_replay_result_t *r,
                     char *err, size_t errlen);
int __wrap_ga_replay(const ga_trace_t *t, const ga_replay_opts_t *o, ga_replay_result_t *r,
                     char *err, size_t errlen);

int __wrap_ga_replay(const ga_trace_t *t, const ga_replay_opts_t *o, ga_replay_result_t *r,
                     char *err, size_t errlen)
{
    int rc = __real_ga_replay(t, o, r, err, errlen);
    if (rc == 0 && o->check && o->mode == GA_REPLAY_VMM) {
        r->check_failures += 2;
        if (r->first_check_fail == SIZE_MAX) {
            r->first_check_fail = 1;
            snprintf(r->check_report, sizeof r->check_report, "forged by replay_checkfail");
        }
    }
    return rc;
}
