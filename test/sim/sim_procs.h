/* simcuda's entry-point list: every function the simulated driver exports, once.
 *
 * One X-macro row per exported function gives the cuGetProcAddress table (sim_getproc.c) and the
 * per-entry-point call counters that SIMCUDA_FAIL counts against (sim_fault.c), so the exports,
 * the versioned lookup and fault injection cannot drift apart: a row whose function is missing
 * fails to link, and a function listed twice fails to compile (its enum constant repeats).
 * The versions are those of the real driver (cuda.h and its cudaTypedefs.h PFN_ names).
 */
#ifndef SIM_PROCS_H
#define SIM_PROCS_H

/* X(base name, first CUDA version, per-thread flavour, exported function) */
#define SIM_PROCS(X)                                                                  \
    X(cuInit, 2000, 0, cuInit)                                                        \
    X(cuDriverGetVersion, 2020, 0, cuDriverGetVersion)                                \
    X(cuDeviceGet, 2000, 0, cuDeviceGet)                                              \
    X(cuDeviceGetCount, 2000, 0, cuDeviceGetCount)                                    \
    X(cuDeviceGetName, 2000, 0, cuDeviceGetName)                                      \
    X(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2)                                 \
    X(cuDeviceGetUuid, 9020, 0, cuDeviceGetUuid)                                      \
    X(cuDeviceGetUuid, 11040, 0, cuDeviceGetUuid_v2)                                  \
    X(cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute)                            \
    X(cuDeviceCanAccessPeer, 4000, 0, cuDeviceCanAccessPeer)                          \
    X(cuCtxEnablePeerAccess, 4000, 0, cuCtxEnablePeerAccess)                          \
    X(cuCtxDisablePeerAccess, 4000, 0, cuCtxDisablePeerAccess)                        \
    X(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain)                    \
    X(cuDevicePrimaryCtxRelease, 7000, 0, cuDevicePrimaryCtxRelease)                  \
    X(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2)              \
    X(cuDevicePrimaryCtxReset, 7000, 0, cuDevicePrimaryCtxReset)                      \
    X(cuDevicePrimaryCtxReset, 11000, 0, cuDevicePrimaryCtxReset_v2)                  \
    X(cuDevicePrimaryCtxGetState, 7000, 0, cuDevicePrimaryCtxGetState)                \
    X(cuDevicePrimaryCtxSetFlags, 7000, 0, cuDevicePrimaryCtxSetFlags)                \
    X(cuDevicePrimaryCtxSetFlags, 11000, 0, cuDevicePrimaryCtxSetFlags_v2)            \
    X(cuCtxCreate, 2000, 0, cuCtxCreate)                                              \
    X(cuCtxCreate, 3020, 0, cuCtxCreate_v2)                                           \
    X(cuCtxCreate, 11040, 0, cuCtxCreate_v3)                                          \
    X(cuCtxCreate, 12050, 0, cuCtxCreate_v4)                                          \
    X(cuCtxDestroy, 2000, 0, cuCtxDestroy)                                            \
    X(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2)                                         \
    X(cuCtxAttach, 2000, 0, cuCtxAttach)                                              \
    X(cuCtxDetach, 2000, 0, cuCtxDetach)                                              \
    X(cuCtxGetApiVersion, 3020, 0, cuCtxGetApiVersion)                                \
    X(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent)                                      \
    X(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent)                                      \
    X(cuCtxPushCurrent, 2000, 0, cuCtxPushCurrent)                                    \
    X(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2)                                 \
    X(cuCtxPopCurrent, 2000, 0, cuCtxPopCurrent)                                      \
    X(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2)                                   \
    X(cuCtxGetDevice, 13000, 0, cuCtxGetDevice_v2)                                    \
    X(cuCtxGetDevice, 2000, 0, cuCtxGetDevice)                                        \
    X(cuCtxSynchronize, 13000, 0, cuCtxSynchronize_v2)                                \
    X(cuCtxSynchronize, 2000, 0, cuCtxSynchronize)                                    \
    X(cuMemAlloc, 2000, 0, cuMemAlloc)                                                \
    X(cuMemAlloc, 3020, 0, cuMemAlloc_v2)                                             \
    X(cuMemAllocPitch, 2000, 0, cuMemAllocPitch)                                      \
    X(cuMemAllocPitch, 3020, 0, cuMemAllocPitch_v2)                                   \
    X(cuMemFree, 2000, 0, cuMemFree)                                                  \
    X(cuMemFree, 3020, 0, cuMemFree_v2)                                               \
    X(cuMemGetInfo, 2000, 0, cuMemGetInfo)                                            \
    X(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2)                                         \
    X(cuMemGetAddressRange, 2000, 0, cuMemGetAddressRange)                            \
    X(cuMemGetAddressRange, 3020, 0, cuMemGetAddressRange_v2)                         \
    X(cuMemAllocManaged, 6000, 0, cuMemAllocManaged)                                  \
    X(cuMemAllocAsync, 11020, 0, cuMemAllocAsync)                                     \
    X(cuMemAllocAsync, 11020, 1, cuMemAllocAsync_ptsz)                                \
    X(cuMemAllocFromPoolAsync, 11020, 0, cuMemAllocFromPoolAsync)                     \
    X(cuMemAllocFromPoolAsync, 11020, 1, cuMemAllocFromPoolAsync_ptsz)                \
    X(cuMemFreeAsync, 11020, 0, cuMemFreeAsync)                                       \
    X(cuMemFreeAsync, 11020, 1, cuMemFreeAsync_ptsz)                                  \
    X(cuDeviceGetDefaultMemPool, 11020, 0, cuDeviceGetDefaultMemPool)                 \
    X(cuDeviceGetMemPool, 11020, 0, cuDeviceGetMemPool)                               \
    X(cuMemPoolTrimTo, 11020, 0, cuMemPoolTrimTo)                                     \
    X(cuMemPoolSetAttribute, 11020, 0, cuMemPoolSetAttribute)                         \
    X(cuMemPoolGetAttribute, 11020, 0, cuMemPoolGetAttribute)                         \
    X(cuMemPoolCreate, 11020, 0, cuMemPoolCreate)                                     \
    X(cuMemPoolDestroy, 11020, 0, cuMemPoolDestroy)                                   \
    X(cuMemCreate, 10020, 0, cuMemCreate)                                             \
    X(cuMemRelease, 10020, 0, cuMemRelease)                                           \
    X(cuMemGetAllocationGranularity, 10020, 0, cuMemGetAllocationGranularity)         \
    X(cuMemGetAllocationPropertiesFromHandle, 10020, 0,                               \
      cuMemGetAllocationPropertiesFromHandle)                                         \
    X(cuMemRetainAllocationHandle, 11000, 0, cuMemRetainAllocationHandle)             \
    X(cuMemExportToShareableHandle, 10020, 0, cuMemExportToShareableHandle)           \
    X(cuMemImportFromShareableHandle, 10020, 0, cuMemImportFromShareableHandle)       \
    X(cuMemAddressReserve, 10020, 0, cuMemAddressReserve)                             \
    X(cuMemAddressFree, 10020, 0, cuMemAddressFree)                                   \
    X(cuMemMap, 10020, 0, cuMemMap)                                                   \
    X(cuMemUnmap, 10020, 0, cuMemUnmap)                                               \
    X(cuMemSetAccess, 10020, 0, cuMemSetAccess)                                       \
    X(cuMemGetAccess, 10020, 0, cuMemGetAccess)                                       \
    X(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2)                                         \
    X(cuMemcpyHtoD, 7000, 1, cuMemcpyHtoD_v2_ptds)                                    \
    X(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2)                                         \
    X(cuMemcpyDtoH, 7000, 1, cuMemcpyDtoH_v2_ptds)                                    \
    X(cuMemcpyDtoD, 3020, 0, cuMemcpyDtoD_v2)                                         \
    X(cuMemcpyDtoD, 7000, 1, cuMemcpyDtoD_v2_ptds)                                    \
    X(cuMemcpy, 4000, 0, cuMemcpy)                                                    \
    X(cuMemcpy, 7000, 1, cuMemcpy_ptds)                                               \
    X(cuMemsetD8, 3020, 0, cuMemsetD8_v2)                                             \
    X(cuMemsetD8, 7000, 1, cuMemsetD8_v2_ptds)                                        \
    X(cuMemsetD32, 3020, 0, cuMemsetD32_v2)                                           \
    X(cuMemsetD32, 7000, 1, cuMemsetD32_v2_ptds)                                      \
    X(cuMemcpyHtoDAsync, 3020, 0, cuMemcpyHtoDAsync_v2)                               \
    X(cuMemcpyHtoDAsync, 7000, 1, cuMemcpyHtoDAsync_v2_ptsz)                          \
    X(cuMemcpyDtoHAsync, 3020, 0, cuMemcpyDtoHAsync_v2)                               \
    X(cuMemcpyDtoHAsync, 7000, 1, cuMemcpyDtoHAsync_v2_ptsz)                          \
    X(cuMemcpyDtoDAsync, 3020, 0, cuMemcpyDtoDAsync_v2)                               \
    X(cuMemcpyDtoDAsync, 7000, 1, cuMemcpyDtoDAsync_v2_ptsz)                          \
    X(cuMemcpyAsync, 4000, 0, cuMemcpyAsync)                                          \
    X(cuMemcpyAsync, 7000, 1, cuMemcpyAsync_ptsz)                                     \
    X(cuMemsetD8Async, 3020, 0, cuMemsetD8Async)                                      \
    X(cuMemsetD8Async, 7000, 1, cuMemsetD8Async_ptsz)                                 \
    X(cuMemsetD32Async, 3020, 0, cuMemsetD32Async)                                    \
    X(cuMemsetD32Async, 7000, 1, cuMemsetD32Async_ptsz)                               \
    X(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute)                          \
    X(cuPointerGetAttributes, 7000, 0, cuPointerGetAttributes)                        \
    X(cuIpcGetMemHandle, 4010, 0, cuIpcGetMemHandle)                                  \
    X(cuStreamCreate, 2000, 0, cuStreamCreate)                                        \
    X(cuStreamDestroy, 2000, 0, cuStreamDestroy)                                      \
    X(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2)                                   \
    X(cuStreamSynchronize, 2000, 0, cuStreamSynchronize)                              \
    X(cuStreamSynchronize, 7000, 1, cuStreamSynchronize_ptsz)                         \
    X(cuStreamCreateWithPriority, 5050, 0, cuStreamCreateWithPriority)                \
    X(cuStreamQuery, 2000, 0, cuStreamQuery)                                          \
    X(cuStreamQuery, 7000, 1, cuStreamQuery_ptsz)                                     \
    X(cuStreamGetId, 12000, 0, cuStreamGetId)                                         \
    X(cuStreamGetId, 12000, 1, cuStreamGetId_ptsz)                                    \
    X(cuStreamGetCtx, 9020, 0, cuStreamGetCtx)                                        \
    X(cuStreamGetCtx, 9020, 1, cuStreamGetCtx_ptsz)                                   \
    X(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent)                                  \
    X(cuStreamBeginCapture, 10000, 0, cuStreamBeginCapture)                           \
    X(cuStreamBeginCapture, 10000, 1, cuStreamBeginCapture_ptsz)                      \
    X(cuStreamBeginCapture, 10010, 0, cuStreamBeginCapture_v2)                        \
    X(cuStreamBeginCapture, 10010, 1, cuStreamBeginCapture_v2_ptsz)                   \
    X(cuStreamBeginCaptureToGraph, 12030, 0, cuStreamBeginCaptureToGraph)             \
    X(cuStreamBeginCaptureToGraph, 12030, 1, cuStreamBeginCaptureToGraph_ptsz)        \
    X(cuStreamEndCapture, 10000, 0, cuStreamEndCapture)                               \
    X(cuStreamEndCapture, 10000, 1, cuStreamEndCapture_ptsz)                          \
    X(cuStreamIsCapturing, 10000, 0, cuStreamIsCapturing)                             \
    X(cuStreamIsCapturing, 10000, 1, cuStreamIsCapturing_ptsz)                        \
    X(cuStreamWaitEvent, 7000, 1, cuStreamWaitEvent_ptsz)                             \
    X(cuEventCreate, 2000, 0, cuEventCreate)                                          \
    X(cuEventDestroy, 2000, 0, cuEventDestroy)                                        \
    X(cuEventDestroy, 4000, 0, cuEventDestroy_v2)                                     \
    X(cuEventRecord, 2000, 0, cuEventRecord)                                          \
    X(cuEventRecord, 7000, 1, cuEventRecord_ptsz)                                     \
    X(cuEventQuery, 2000, 0, cuEventQuery)                                            \
    X(cuEventSynchronize, 2000, 0, cuEventSynchronize)                                \
    X(cuEventElapsedTime, 2000, 0, cuEventElapsedTime)                                \
    X(cuEventElapsedTime, 12080, 0, cuEventElapsedTime_v2)                            \
    X(cuGetErrorString, 6000, 0, cuGetErrorString)                                    \
    X(cuGetErrorName, 6000, 0, cuGetErrorName)                                        \
    X(cuGetProcAddress, 11030, 0, cuGetProcAddress)                                   \
    X(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2)

#endif /* SIM_PROCS_H */
