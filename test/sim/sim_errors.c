/* simcuda error strings: cuGetErrorName and cuGetErrorString over one table of the CUresult codes a
 * program is likely to meet. Like the real driver, an unknown code is CUDA_ERROR_INVALID_VALUE with
 * the out-parameter set to NULL. Works before cuInit. The same table turns a name given in
 * SIMCUDA_FAIL back into its code.
 */
#include "sim_internal.h"

#include <string.h>

#define SIM_ERRORS(X)                                                                            \
    X(CUDA_SUCCESS, "no error")                                                                  \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                              \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                 \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                        \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                          \
    X(CUDA_ERROR_PROFILER_DISABLED, "profiler disabled while using external profiling tool")     \
    X(CUDA_ERROR_STUB_LIBRARY, "CUDA driver is a stub library")                                  \
    X(CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA-capable device(s) is/are busy or unavailable")        \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                       \
    X(CUDA_ERROR_DEVICE_NOT_LICENSED, "device doesn't have valid Grid license")                  \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                      \
    X(CUDA_ERROR_CONTEXT_ALREADY_CURRENT, "context already current")                             \
    X(CUDA_ERROR_MAP_FAILED, "mapping of buffer object failed")                                  \
    X(CUDA_ERROR_UNMAP_FAILED, "unmapping of buffer object failed")                              \
    X(CUDA_ERROR_ALREADY_MAPPED, "resource already mapped")                                      \
    X(CUDA_ERROR_NO_BINARY_FOR_GPU, "no kernel image is available for execution on the device")  \
    X(CUDA_ERROR_NOT_MAPPED, "resource not mapped")                                              \
    X(CUDA_ERROR_INVALID_SOURCE, "device kernel image is invalid")                               \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                               \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                      \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")        \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                            \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                                  \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")                    \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                                    \
    X(CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "peer access is not supported between these two devices") \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                                   \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                       \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                       \
    X(CUDA_ERROR_SYSTEM_NOT_READY, "system not yet initialized")                                 \
    X(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, "system has unsupported display driver / cuda driver combination") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing") \
    X(CUDA_ERROR_TIMEOUT, "wait operation timed out")                                            \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

typedef struct sim_error {
    CUresult code;
    const char *name;
    const char *text;
} sim_error_t;

static const sim_error_t sim_errors[] = {
#define SIM_ERROR_ROW(code, text) {code, #code, text},
    SIM_ERRORS(SIM_ERROR_ROW)
#undef SIM_ERROR_ROW
};

static const sim_error_t *sim_error(CUresult e)
{
    for (size_t i = 0; i < sizeof sim_errors / sizeof sim_errors[0]; i++)
        if (sim_errors[i].code == e)
            return &sim_errors[i];
    return NULL;
}

int sim_error_by_name(const char *name, CUresult *out)
{
    for (size_t i = 0; name && i < sizeof sim_errors / sizeof sim_errors[0]; i++)
        if (strcmp(sim_errors[i].name, name) == 0)
            return *out = sim_errors[i].code, 0;
    return -1;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    SIM_ENTER(cuGetErrorName);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_error_t *e = sim_error(error);
    *pStr = e ? e->name : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    SIM_ENTER(cuGetErrorString);
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    const sim_error_t *e = sim_error(error);
    *pStr = e ? e->text : NULL;
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
