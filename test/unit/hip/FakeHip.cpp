//===- FakeHip.cpp - A stand-in libamdhip64 for the HIP device tests -----===//
//
// Exports the entry points Kiln resolves, with host memory behind them.
// KILN_FAKE_HIP_DEVICES (default 0) sets the device count,
// KILN_FAKE_HIP_STREAM_STUCK makes hipStreamQuery say "not ready" forever. The
// last launch
// is recorded in kiln_fake_hip_last_launch for the tests to inspect. Built
// with KILN_FAKE_HIP_INCOMPLETE it lacks hipStreamSynchronize.
//
//===----------------------------------------------------------------------===//

#include "test/unit/hip/FakeHip.h"
#include "runtime/hip/HipApi.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>

// The same parameter types as the runtime's symbol table, so calls through
// its function pointers match exactly (UBSan -fsanitize=function checks).
using kiln::hip::hipError_t;
using kiln::hip::hipFunction_t;
using kiln::hip::hipMemcpyKind;
using kiln::hip::hipModule_t;
using kiln::hip::hipStream_t;

extern "C" {

__attribute__((visibility("default"))) FakeLaunch kiln_fake_hip_last_launch;

static int deviceCount() {
  const char *env = std::getenv("KILN_FAKE_HIP_DEVICES");
  return env ? std::atoi(env) : 0;
}

#define EXPORT __attribute__((visibility("default")))

#ifdef KILN_FAKE_HIP_GRAPHS
static bool capturing = false;
static int captured = 0; // launches recorded by the capture under way
constexpr hipError_t kCaptureUnsupported = 900;
#endif

EXPORT hipError_t hipInit(unsigned) { return 0; }
EXPORT hipError_t hipGetDeviceCount(int *count) {
  *count = deviceCount();
  return 0;
}
EXPORT hipError_t hipSetDevice(int device) {
  return device >= 0 && device < deviceCount() ? 0 : 101;
}
EXPORT hipError_t hipModuleLoadData(hipModule_t *module, const void *image) {
  if (std::memcmp(image,
                  "\x7f"
                  "ELF",
                  4) != 0)
    return 200; // hipErrorInvalidImage
  *module = static_cast<hipModule_t>(std::malloc(1));
  return 0;
}
EXPORT hipError_t hipModuleUnload(hipModule_t module) {
  std::free(module);
  return 0;
}
EXPORT hipError_t hipModuleGetFunction(hipFunction_t *fn, hipModule_t,
                                       const char *name) {
  if (std::strcmp(name, "missing") == 0)
    return 500; // hipErrorNotFound
  static int token;
  *fn = reinterpret_cast<hipFunction_t>(&token);
  return 0;
}
EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t, unsigned gx, unsigned gy,
                                        unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned shared,
                                        hipStream_t stream, void **params,
                                        void **extra) {
  // Only the packed form: {BUFFER_POINTER, p, BUFFER_SIZE, &size, END}.
  if (params || !extra || extra[0] != (void *)1 || extra[2] != (void *)2 ||
      extra[4] != (void *)3)
    return 1; // hipErrorInvalidValue
  FakeLaunch &l = kiln_fake_hip_last_launch;
#ifdef KILN_FAKE_HIP_GRAPHS
  if (capturing) {
    ++captured;
    return 0;
  }
#endif
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.shared = shared;
  l.hasStream = stream != nullptr;
  l.argBytes = *static_cast<size_t *>(extra[3]);
  if (l.argBytes > sizeof(l.args))
    return 1;
  std::memcpy(l.args, extra[1], l.argBytes);
  ++l.launches;
  return 0;
}
EXPORT hipError_t hipMalloc(void **p, size_t size) {
#ifdef KILN_FAKE_HIP_GRAPHS
  if (capturing)
    return kCaptureUnsupported;
#endif
  *p = std::malloc(size);
  return *p ? 0 : 2; // hipErrorOutOfMemory
}
EXPORT hipError_t hipMemGetInfo(size_t *free, size_t *total) {
  *free = *total = size_t(8) << 30;
  return 0;
}
EXPORT hipError_t hipFree(void *p) {
  std::free(p);
  return 0;
}
EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t size,
                            hipMemcpyKind) {
#ifdef KILN_FAKE_HIP_GRAPHS
  if (capturing)
    return kCaptureUnsupported;
#endif
  std::memcpy(dst, src, size);
  return 0;
}
EXPORT hipError_t hipStreamCreate(hipStream_t *stream) {
  *stream = static_cast<hipStream_t>(std::malloc(1));
  return 0;
}
EXPORT hipError_t hipStreamDestroy(hipStream_t stream) {
  std::free(stream);
  return 0;
}
#ifndef KILN_FAKE_HIP_INCOMPLETE
EXPORT hipError_t hipStreamSynchronize(hipStream_t) { return 0; }
#endif
/// KILN_FAKE_HIP_STREAM_STUCK set: the stream never finishes (a collective
/// whose peer died).
EXPORT hipError_t hipStreamQuery(hipStream_t) {
  return std::getenv("KILN_FAKE_HIP_STREAM_STUCK") ? kiln::hip::hipErrorNotReady
                                                   : 0;
}
EXPORT const char *hipGetErrorString(hipError_t error) {
  switch (error) {
  case 500:
    return "hipErrorNotFound";
  case 200:
    return "hipErrorInvalidImage";
  default:
    return "hipErrorUnknown";
  }
}

#ifdef KILN_FAKE_HIP_GRAPHS
// A graph is the number of launches it holds.
EXPORT hipError_t hipStreamBeginCapture(hipStream_t, int) {
  if (capturing)
    return 401; // hipErrorIllegalState
  capturing = true;
  captured = 0;
  return 0;
}
EXPORT hipError_t hipStreamEndCapture(hipStream_t, kiln::hip::hipGraph_t *g) {
  if (!capturing)
    return 401;
  capturing = false;
  *g = reinterpret_cast<kiln::hip::hipGraph_t>(new int(captured));
  ++kiln_fake_hip_last_launch.captures;
  return 0;
}
EXPORT hipError_t hipGraphInstantiate(kiln::hip::hipGraphExec_t *exec,
                                      kiln::hip::hipGraph_t g,
                                      kiln::hip::hipGraphNode_t *, char *,
                                      size_t) {
  *exec = reinterpret_cast<kiln::hip::hipGraphExec_t>(
      new int(*reinterpret_cast<int *>(g)));
  return 0;
}
EXPORT hipError_t hipGraphLaunch(kiln::hip::hipGraphExec_t exec, hipStream_t) {
  if (capturing)
    return kCaptureUnsupported;
  kiln_fake_hip_last_launch.launches += *reinterpret_cast<int *>(exec);
  ++kiln_fake_hip_last_launch.graphLaunches;
  return 0;
}
EXPORT hipError_t hipGraphExecDestroy(kiln::hip::hipGraphExec_t exec) {
  delete reinterpret_cast<int *>(exec);
  return 0;
}
EXPORT hipError_t hipGraphDestroy(kiln::hip::hipGraph_t g) {
  delete reinterpret_cast<int *>(g);
  return 0;
}
#endif

} // extern "C"
