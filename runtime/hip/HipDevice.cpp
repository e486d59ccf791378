//===- HipDevice.cpp ------------------------------------------------------===//

#include "runtime/hip/HipDevice.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace kiln;
using namespace kiln::hip;

KernelArgs &KernelArgs::append(const void *v, size_t size) {
  size_t offset = (bytes_.size() + size - 1) / size * size;
  bytes_.resize(offset + size);
  std::memcpy(bytes_.data() + offset, v, size);
  return *this;
}

Result<std::unique_ptr<HipDevice>>
HipDevice::open(const HipDeviceOptions &options) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<HipSymbols> symbols,
                        HipSymbols::load(options.libraries.empty()
                                             ? defaultHipLibraries()
                                             : options.libraries));
  std::unique_ptr<HipDevice> device(new HipDevice(symbols));
  const HipSymbols &s = *symbols;
  // Without a GPU, HIP versions differ in which call reports it.
  hipError_t init = s.hipInit(0);
  int count = 0;
  hipError_t counted = init == hipSuccess ? s.hipGetDeviceCount(&count) : init;
  if (counted == hipErrorNoDevice || (counted == hipSuccess && count == 0))
    return makeError(StatusCode::Unavailable, "no AMD GPU: the HIP runtime ",
                     s.path(),
                     " reports 0 devices; --device=hip needs one, "
                     "use --device=cpu");
  if (counted != hipSuccess)
    return hipStatus(s, counted,
                     init == hipSuccess ? "hipGetDeviceCount(&count)"
                                        : "hipInit(0)",
                     __FILE__, __LINE__);
  int ordinal = options.ordinal;
  if (ordinal == -1) {
    ordinal = 0;
    for (const char *name :
         {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
      if (const char *v = std::getenv(name)) {
        ordinal = std::atoi(v) % count;
        break;
      }
  }
  if (ordinal < 0 || ordinal >= count)
    return makeError(StatusCode::InvalidArgument, "GPU ", ordinal,
                     " does not exist: the HIP runtime reports ", count,
                     " device", count == 1 ? "" : "s");
  device->deviceCount_ = count;
  device->ordinal_ = ordinal;
  KILN_HIP_RETURN_IF_ERROR(s, hipSetDevice(ordinal));
  KILN_HIP_RETURN_IF_ERROR(s, hipStreamCreate(&device->stream_));
  return device;
}

HipDevice::~HipDevice() {
  // Teardown errors have nowhere to go; the process keeps running.
  for (hipModule_t module : modules_)
    (void)symbols_->hipModuleUnload(module);
  if (stream_)
    (void)symbols_->hipStreamDestroy(stream_);
}

Result<hipModule_t> HipDevice::loadModule(const void *codeObject, size_t size) {
  static const unsigned char kElf[4] = {0x7f, 'E', 'L', 'F'};
  if (size < 4 || std::memcmp(codeObject, kElf, 4) != 0)
    return makeError(StatusCode::InvalidArgument,
                     "code object is not an ELF file (", size, " bytes)");
  hipModule_t module = nullptr;
  KILN_HIP_RETURN_IF_ERROR(*symbols_, hipModuleLoadData(&module, codeObject));
  modules_.push_back(module);
  return module;
}

Result<hipFunction_t> HipDevice::function(hipModule_t module,
                                          const std::string &name) {
  hipFunction_t fn = nullptr;
  hipError_t error = symbols_->hipModuleGetFunction(&fn, module, name.c_str());
  if (error != hipSuccess)
    return hipStatus(*symbols_, error, "hipModuleGetFunction", __FILE__,
                     __LINE__)
        .withContext("kernel '" + name + "'");
  return fn;
}

Status HipDevice::launch(hipFunction_t function, const LaunchDims &dims,
                         const KernelArgs &args) {
  size_t size = args.size();
  void *extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER,
                   const_cast<void *>(args.data()),
                   HIP_LAUNCH_PARAM_BUFFER_SIZE, &size, HIP_LAUNCH_PARAM_END};
  KILN_HIP_RETURN_IF_ERROR(
      *symbols_,
      hipModuleLaunchKernel(function, dims.grid[0], dims.grid[1], dims.grid[2],
                            dims.block[0], dims.block[1], dims.block[2],
                            dims.sharedBytes, stream_, nullptr, extra));
  return Status::ok();
}

HipGraph::~HipGraph() {
  if (exec_)
    (void)symbols_->hipGraphExecDestroy(exec_);
  if (graph_)
    (void)symbols_->hipGraphDestroy(graph_);
}

Status HipDevice::beginCapture() {
  if (!supportsGraphs())
    return makeError(StatusCode::Unavailable, symbols_->path(),
                     " has no stream capture (hipStreamBeginCapture)");
  KILN_HIP_RETURN_IF_ERROR(
      *symbols_,
      hipStreamBeginCapture(stream_, hipStreamCaptureModeThreadLocal));
  return Status::ok();
}

Result<std::unique_ptr<HipGraph>> HipDevice::endCapture() {
  hipGraph_t graph = nullptr;
  KILN_HIP_RETURN_IF_ERROR(*symbols_, hipStreamEndCapture(stream_, &graph));
  hipGraphExec_t exec = nullptr;
  hipError_t error =
      symbols_->hipGraphInstantiate(&exec, graph, nullptr, nullptr, 0);
  if (error != hipSuccess) {
    (void)symbols_->hipGraphDestroy(graph);
    return hipStatus(*symbols_, error, "hipGraphInstantiate(&exec, graph)",
                     __FILE__, __LINE__);
  }
  return std::unique_ptr<HipGraph>(new HipGraph(symbols_, graph, exec));
}

Status HipDevice::launchGraph(const HipGraph &graph) {
  KILN_HIP_RETURN_IF_ERROR(*symbols_, hipGraphLaunch(graph.exec_, stream_));
  return Status::ok();
}

Status HipDevice::synchronize() {
  KILN_HIP_RETURN_IF_ERROR(*symbols_, hipStreamSynchronize(stream_));
  return Status::ok();
}

Status HipDevice::synchronize(double seconds, const std::string &why) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (int polls = 0;; ++polls) {
    hipError_t state = symbols_->hipStreamQuery(stream_);
    if (state == hipSuccess)
      return Status::ok();
    if (state != hipErrorNotReady)
      return hipStatus(*symbols_, state, "hipStreamQuery(stream)", __FILE__,
                       __LINE__);
    double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited >= seconds) {
      char shown[32];
      std::snprintf(shown, sizeof(shown), "%.1f", seconds);
      return makeError(StatusCode::Unavailable, "GPU ", ordinal_,
                       ": its queued work did not finish within ", shown, " s",
                       why.empty() ? "" : " (" + why + ")");
    }
    // Back to back at first, then yielding, then sleeping: a decode step
    // is milliseconds, a stuck collective is forever.
    if (polls < 64)
      continue;
    if (waited < 0.01)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(
          std::chrono::microseconds(waited < 0.1 ? 100 : 1000));
  }
}

Result<void *> HipDevice::allocate(size_t bytes) {
  void *p = nullptr;
  KILN_HIP_RETURN_IF_ERROR(*symbols_, hipMalloc(&p, bytes));
  return p;
}

int64_t HipDevice::freeMemory() const {
  size_t free = 0, total = 0;
  if (symbols_->hipMemGetInfo(&free, &total) != hipSuccess)
    return 0;
  return int64_t(free);
}

Status HipDevice::release(void *pointer) {
  KILN_HIP_RETURN_IF_ERROR(*symbols_, hipFree(pointer));
  return Status::ok();
}

Status HipDevice::copyToDevice(void *device, const void *host, size_t bytes) {
  KILN_HIP_RETURN_IF_ERROR(
      *symbols_, hipMemcpy(device, host, bytes, hipMemcpyHostToDevice));
  return Status::ok();
}

Status HipDevice::copyOnDevice(void *to, const void *from, size_t bytes) {
  KILN_HIP_RETURN_IF_ERROR(*symbols_,
                           hipMemcpy(to, from, bytes, hipMemcpyDeviceToDevice));
  return Status::ok();
}

Status HipDevice::copyToHost(void *host, const void *device, size_t bytes) {
  KILN_HIP_RETURN_IF_ERROR(
      *symbols_, hipMemcpy(host, device, bytes, hipMemcpyDeviceToHost));
  return Status::ok();
}
