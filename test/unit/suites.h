/* The unit test suites, one X(name) per line; main.c runs them all. Each name is a function
 * `Suite *name(void)` defined in its own test_*.c file. No include guard: this is an X-macro list
 * included with X defined. */
X(arena_suite)
X(random_suite)
X(check_suite)
X(trace_suite)
X(replay_suite)
X(size_suite)
X(hami_suite)
X(vmm_suite)
X(vmm_runs_suite)
X(names_suite)
X(outside_model_suite)
X(outside_vmm_suite)
X(vafit_suite)
X(outside134_suite)
X(outside134_replay_suite)
X(outside136_suite)
