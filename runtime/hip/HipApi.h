//===- HipApi.h - The few HIP declarations Kiln uses, without ROCm -------===//
//
// Kiln never includes ROCm headers: the runtime builds and its tests pass on
// machines without ROCm, and libamdhip64 is opened at run time (as IREE's
// HIP driver does, runtime/src/iree/hal/drivers/hip/dynamic_symbols.c).
// These declarations mirror hip_runtime_api.h for the entry points in
// HipSymbols; they are part of HIP's stable C ABI.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HIP_HIPAPI_H
#define KILN_RUNTIME_HIP_HIPAPI_H

#include <cstddef>

namespace kiln::hip {

using hipError_t = int;
inline constexpr hipError_t hipSuccess = 0;
inline constexpr hipError_t hipErrorNoDevice = 100;
inline constexpr hipError_t hipErrorNotReady = 600;

using hipModule_t = struct ihipModule_t *;
using hipFunction_t = struct ihipModuleSymbol_t *;
using hipStream_t = struct ihipStream_t *;
using hipGraph_t = struct ihipGraph *;
using hipGraphExec_t = struct hipGraphExec *;
using hipGraphNode_t = struct hipGraphNode *;

/// hipStreamCaptureMode: ThreadLocal refuses unsafe calls (hipMalloc, a
/// synchronous hipMemcpy) made by the capturing thread while it captures.
inline constexpr int hipStreamCaptureModeThreadLocal = 1;

enum hipMemcpyKind : int {
  hipMemcpyHostToHost = 0,
  hipMemcpyHostToDevice = 1,
  hipMemcpyDeviceToHost = 2,
  hipMemcpyDeviceToDevice = 3,
  hipMemcpyDefault = 4,
};

/// Keys of hipModuleLaunchKernel's `extra` array: a packed argument buffer.
inline void *const HIP_LAUNCH_PARAM_BUFFER_POINTER =
    reinterpret_cast<void *>(0x01);
inline void *const HIP_LAUNCH_PARAM_BUFFER_SIZE =
    reinterpret_cast<void *>(0x02);
inline void *const HIP_LAUNCH_PARAM_END = reinterpret_cast<void *>(0x03);

// X(name, return type, parameter list): every entry point the device uses.
#define KILN_HIP_SYMBOLS(X)                                                    \
  X(hipInit, hipError_t, (unsigned int flags))                                 \
  X(hipGetDeviceCount, hipError_t, (int *count))                               \
  X(hipSetDevice, hipError_t, (int device))                                    \
  X(hipModuleLoadData, hipError_t, (hipModule_t * module, const void *image))  \
  X(hipModuleUnload, hipError_t, (hipModule_t module))                         \
  X(hipModuleGetFunction, hipError_t,                                          \
    (hipFunction_t * function, hipModule_t module, const char *name))          \
  X(hipModuleLaunchKernel, hipError_t,                                         \
    (hipFunction_t f, unsigned gridX, unsigned gridY, unsigned gridZ,          \
     unsigned blockX, unsigned blockY, unsigned blockZ,                        \
     unsigned sharedMemBytes, hipStream_t stream, void **kernelParams,         \
     void **extra))                                                            \
  X(hipMalloc, hipError_t, (void **ptr, size_t size))                          \
  X(hipFree, hipError_t, (void *ptr))                                          \
  X(hipMemGetInfo, hipError_t, (size_t *free, size_t *total))                  \
  X(hipMemcpy, hipError_t,                                                     \
    (void *dst, const void *src, size_t size, hipMemcpyKind kind))             \
  X(hipStreamCreate, hipError_t, (hipStream_t * stream))                       \
  X(hipStreamDestroy, hipError_t, (hipStream_t stream))                        \
  X(hipStreamSynchronize, hipError_t, (hipStream_t stream))                    \
  X(hipStreamQuery, hipError_t, (hipStream_t stream))                          \
  X(hipGetErrorString, const char *, (hipError_t error))

// Stream capture into graphs (HipDevice::beginCapture): optional, so a
// runtime without them still runs every plan, launch by launch.
#define KILN_HIP_GRAPH_SYMBOLS(X)                                              \
  X(hipStreamBeginCapture, hipError_t, (hipStream_t stream, int mode))         \
  X(hipStreamEndCapture, hipError_t, (hipStream_t stream, hipGraph_t * graph)) \
  X(hipGraphInstantiate, hipError_t,                                           \
    (hipGraphExec_t * exec, hipGraph_t graph, hipGraphNode_t * errorNode,      \
     char *log, size_t logSize))                                               \
  X(hipGraphLaunch, hipError_t, (hipGraphExec_t exec, hipStream_t stream))     \
  X(hipGraphExecDestroy, hipError_t, (hipGraphExec_t exec))                    \
  X(hipGraphDestroy, hipError_t, (hipGraph_t graph))

} // namespace kiln::hip

#endif // KILN_RUNTIME_HIP_HIPAPI_H
