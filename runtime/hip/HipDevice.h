//===- HipDevice.h - One AMD GPU through the HIP runtime -----------------===//
//
// Loads HSA code objects the compiler emitted (passes/codegen/rocdl), moves
// buffers, and launches kernels with a packed argument buffer (AMDGPU.md
// section 10). Every HIP failure becomes a Status naming the call, file and
// line. open() reports a clear Unavailable error when libamdhip64 or a GPU
// is absent, so callers can fall back to the CPU device.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_HIP_HIPDEVICE_H
#define KILN_RUNTIME_HIP_HIPDEVICE_H

#include "runtime/hip/HipSymbols.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::hip {

struct HipDeviceOptions {
  /// The GPU; -1: this process's local rank (under an MPI launcher, which
  /// sets OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID) modulo
  /// the GPUs, else GPU 0: one GPU per rank on a node.
  int ordinal = -1;
  /// Libraries to try; empty: defaultHipLibraries().
  std::vector<std::string> libraries;
};

/// A kernel's launch geometry.
struct LaunchDims {
  std::array<uint32_t, 3> grid = {1, 1, 1};  // workgroups
  std::array<uint32_t, 3> block = {1, 1, 1}; // threads per workgroup
  uint32_t sharedBytes = 0;                  // dynamic LDS
};

/// The kernel argument segment: values at their natural alignment, in
/// declaration order (bare pointers are 8 bytes, i32 4).
class KernelArgs {
public:
  KernelArgs &pointer(const void *p) { return append(&p, sizeof(p)); }
  KernelArgs &i32(int32_t v) { return append(&v, sizeof(v)); }
  const void *data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

private:
  KernelArgs &append(const void *v, size_t size);
  std::vector<uint8_t> bytes_;
};

/// Launches captured from the device's stream (HipDevice::endCapture),
/// instantiated: one launchGraph() replays them all with the arguments they
/// were captured with.
class HipGraph {
public:
  ~HipGraph();
  HipGraph(const HipGraph &) = delete;
  HipGraph &operator=(const HipGraph &) = delete;

private:
  friend class HipDevice;
  HipGraph(std::shared_ptr<HipSymbols> symbols, hipGraph_t graph,
           hipGraphExec_t exec)
      : symbols_(std::move(symbols)), graph_(graph), exec_(exec) {}
  std::shared_ptr<HipSymbols> symbols_;
  hipGraph_t graph_ = nullptr;
  hipGraphExec_t exec_ = nullptr;
};

class HipDevice {
public:
  static Result<std::unique_ptr<HipDevice>>
  open(const HipDeviceOptions &options = {});
  ~HipDevice();
  HipDevice(const HipDevice &) = delete;
  HipDevice &operator=(const HipDevice &) = delete;

  int deviceCount() const { return deviceCount_; }
  const std::string &libraryPath() const { return symbols_->path(); }

  /// Loads a code object; the device keeps it until destroyed.
  Result<hipModule_t> loadModule(const void *codeObject, size_t size);
  Result<hipFunction_t> function(hipModule_t module, const std::string &name);
  Status launch(hipFunction_t function, const LaunchDims &dims,
                const KernelArgs &args);
  /// Whether the runtime has stream capture and graphs.
  bool supportsGraphs() const { return symbols_->hasGraphs(); }
  /// From now until endCapture() the stream's launches are recorded, not
  /// run; allocating or a synchronous copy in between is an error.
  Status beginCapture();
  /// Ends the capture and instantiates what it recorded.
  Result<std::unique_ptr<HipGraph>> endCapture();
  /// Queues every launch of `graph` on the stream.
  Status launchGraph(const HipGraph &graph);
  Status synchronize();
  /// synchronize() with a deadline: Unavailable when the stream's work is
  /// not done within `seconds` (a kernel or collective that never ends, e.g.
  /// a peer rank that died inside an RCCL call). `why` ends the message.
  Status synchronize(double seconds, const std::string &why);

  Result<void *> allocate(size_t bytes);
  Status release(void *pointer);
  /// Bytes of device memory free now (0 when the runtime cannot say).
  int64_t freeMemory() const;
  Status copyToDevice(void *device, const void *host, size_t bytes);
  Status copyToHost(void *host, const void *device, size_t bytes);
  Status copyOnDevice(void *to, const void *from, size_t bytes);
  /// The stream every launch and copy is queued on.
  hipStream_t stream() const { return stream_; }
  int ordinal() const { return ordinal_; }

private:
  explicit HipDevice(std::shared_ptr<HipSymbols> symbols)
      : symbols_(std::move(symbols)) {}
  std::shared_ptr<HipSymbols> symbols_;
  int deviceCount_ = 0;
  hipStream_t stream_ = nullptr;
  int ordinal_ = 0;
  std::vector<hipModule_t> modules_;
};

} // namespace kiln::hip

#endif // KILN_RUNTIME_HIP_HIPDEVICE_H
