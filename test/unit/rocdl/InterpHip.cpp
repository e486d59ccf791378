//===- InterpHip.cpp - A libamdhip64 whose GPU is the kernel interpreter --===//
//
// Exports the HIP entry points the runtime resolves (runtime/hip/HipApi.h)
// with host memory behind them, and runs every launched kernel through the
// CPU interpreter of Kiln's generated GPU IR (KernelInterpreter.h): the
// kernel is rebuilt from its symbol (KernelSpec::fromSymbol, the same
// generator that produced the code object), so `kiln-run --device=hip`
// executes the artifact's real launch sequence, grids and argument
// bindings here, without a GPU. Tests point KILN_HIP_LIBRARY at it; it
// reports one device. Stream capture records launches into graphs that
// replay them. Failures print the interpreter's message to stderr
// and return a HIP error, which the runtime turns into a Status.
//
//===----------------------------------------------------------------------===//

#include "runtime/hip/HipApi.h"
#include "test/unit/rocdl/InterpHipMemory.h"
#include "tools/gpu-interp/KernelInterpreter.h"

#include "passes/codegen/rocdl/RocdlCodegen.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/MLIRContext.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <elf.h>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

using kiln::hip::hipError_t;
using kiln::hip::hipFunction_t;
using kiln::hip::hipMemcpyKind;
using kiln::hip::hipModule_t;
using kiln::hip::hipStream_t;
namespace interp = kiln::rocdl::interp;

namespace {

constexpr hipError_t kInvalidValue = 1, kOutOfMemory = 2, kInvalidImage = 200,
                     kNotFound = 500, kLaunchFailure = 719;

struct Module {
  std::set<std::string> symbols; // from the code object's symbol table
};

struct Function {
  kiln::rocdl::KernelSpec spec;
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  std::vector<bool> isPointer; // per kernel argument
};

std::mutex mutex;
std::map<uintptr_t, size_t> allocations; // base -> bytes
std::map<std::string, std::unique_ptr<Function>> functions;

/// The allocation holding `p` and the bytes from `p` to its end.
size_t bytesFrom(const void *p) {
  auto a = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(a);
  if (it == allocations.begin())
    return 0;
  --it;
  return a < it->first + it->second ? it->first + it->second - a : 0;
}

/// Kernel names in an ELF's symbol tables.
bool readSymbols(const uint8_t *image, std::set<std::string> &out) {
  const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(image);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_shentsize != sizeof(Elf64_Shdr))
    return false;
  const auto *sh = reinterpret_cast<const Elf64_Shdr *>(image + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB && sh[i].sh_type != SHT_DYNSYM)
      continue;
    const char *names =
        reinterpret_cast<const char *>(image + sh[sh[i].sh_link].sh_offset);
    const auto *syms =
        reinterpret_cast<const Elf64_Sym *>(image + sh[i].sh_offset);
    for (size_t s = 0; s < sh[i].sh_size / sizeof(Elf64_Sym); ++s)
      if (ELF64_ST_TYPE(syms[s].st_info) == STT_FUNC)
        out.insert(names + syms[s].st_name);
  }
  return !out.empty();
}

} // namespace

#define EXPORT extern "C" __attribute__((visibility("default")))

EXPORT hipError_t hipInit(unsigned) { return 0; }
EXPORT hipError_t hipGetDeviceCount(int *count) {
  *count = 1;
  return 0;
}
EXPORT hipError_t hipSetDevice(int device) { return device == 0 ? 0 : 101; }

EXPORT hipError_t hipModuleLoadData(hipModule_t *module, const void *image) {
  auto m = std::make_unique<Module>();
  if (!readSymbols(static_cast<const uint8_t *>(image), m->symbols))
    return kInvalidImage;
  *module = reinterpret_cast<hipModule_t>(m.release());
  return 0;
}
EXPORT hipError_t hipModuleUnload(hipModule_t module) {
  delete reinterpret_cast<Module *>(module);
  return 0;
}

EXPORT hipError_t hipModuleGetFunction(hipFunction_t *fn, hipModule_t module,
                                       const char *name) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!reinterpret_cast<Module *>(module)->symbols.count(name))
    return kNotFound;
  auto &f = functions[name];
  if (!f) {
    std::optional<kiln::rocdl::KernelSpec> spec =
        kiln::rocdl::KernelSpec::fromSymbol(name);
    if (!spec)
      return kNotFound;
    auto fresh = std::make_unique<Function>();
    fresh->spec = *spec;
    fresh->context = std::make_unique<mlir::MLIRContext>();
    fresh->module = kiln::rocdl::buildKernels(*fresh->context, {*spec});
    if (!fresh->module)
      return kNotFound;
    fresh->module->walk([&](mlir::gpu::GPUFuncOp fn) {
      if (fn.getName() == name)
        for (mlir::Type t : fn.getArgumentTypes())
          fresh->isPointer.push_back(mlir::isa<mlir::MemRefType>(t));
    });
    f = std::move(fresh);
  }
  *fn = reinterpret_cast<hipFunction_t>(f.get());
  return 0;
}

namespace {

/// A launch recorded while its stream captured (hipStreamBeginCapture).
struct Recorded {
  Function *function;
  unsigned grid[3];
  std::vector<uint8_t> args; // the packed argument buffer, copied
};
/// A captured or instantiated graph: its launches in order.
struct Graph {
  std::vector<Recorded> launches;
};
std::map<hipStream_t, std::unique_ptr<Graph>> capturing;
constexpr hipError_t kCaptureUnsupported = 900, kIllegalState = 401;

/// Runs one launch now (the caller holds `mutex`).
hipError_t run(Function *f, const unsigned grid[3], const uint8_t *bytes,
               size_t size) {
  size_t offset = 0;
  std::vector<interp::KernelArg> args;
  for (bool pointer : f->isPointer) {
    size_t width = pointer ? 8 : 4;
    offset = (offset + width - 1) / width * width;
    if (offset + width > size)
      return kInvalidValue;
    if (pointer) {
      void *p;
      std::memcpy(&p, bytes + offset, 8);
      args.push_back(interp::KernelArg::ptr(p, p ? bytesFrom(p) : 0));
    } else {
      int32_t v;
      std::memcpy(&v, bytes + offset, 4);
      args.push_back(interp::KernelArg::i32(v));
    }
    offset += width;
  }
  std::string error = interp::runKernel(
      *f->module, f->spec.symbol(),
      {int64_t(grid[0]), int64_t(grid[1]), int64_t(grid[2])}, args);
  if (!error.empty()) {
    std::fprintf(stderr, "interp_amdhip64: %s: %s\n", f->spec.symbol().c_str(),
                 error.c_str());
    return kLaunchFailure;
  }
  return 0;
}

} // namespace

EXPORT hipError_t hipModuleLaunchKernel(hipFunction_t fn, unsigned gx,
                                        unsigned gy, unsigned gz, unsigned,
                                        unsigned, unsigned, unsigned,
                                        hipStream_t stream, void **params,
                                        void **extra) {
  if (params || !extra || extra[0] != (void *)1 || extra[2] != (void *)2 ||
      extra[4] != (void *)3)
    return kInvalidValue;
  std::lock_guard<std::mutex> lock(mutex);
  auto *f = reinterpret_cast<Function *>(fn);
  const auto *bytes = static_cast<const uint8_t *>(extra[1]);
  size_t size = *static_cast<size_t *>(extra[3]);
  const unsigned grid[3] = {gx, gy, gz};
  auto it = capturing.find(stream);
  if (it != capturing.end()) { // recorded, run at each hipGraphLaunch
    it->second->launches.push_back(
        {f, {gx, gy, gz}, std::vector<uint8_t>(bytes, bytes + size)});
    return 0;
  }
  return run(f, grid, bytes, size);
}

// Stream capture and graphs: a graph replays its recorded launches in
// order. As in HIP's thread-local capture mode, allocating or a synchronous
// copy while a stream captures is an error (hipErrorStreamCaptureUnsupported).
EXPORT hipError_t hipStreamBeginCapture(hipStream_t stream, int) {
  std::lock_guard<std::mutex> lock(mutex);
  if (capturing.count(stream))
    return kIllegalState;
  capturing[stream] = std::make_unique<Graph>();
  return 0;
}
EXPORT hipError_t hipStreamEndCapture(hipStream_t stream,
                                      kiln::hip::hipGraph_t *graph) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = capturing.find(stream);
  if (it == capturing.end())
    return kIllegalState;
  *graph = reinterpret_cast<kiln::hip::hipGraph_t>(it->second.release());
  capturing.erase(it);
  return 0;
}
EXPORT hipError_t hipGraphInstantiate(kiln::hip::hipGraphExec_t *exec,
                                      kiln::hip::hipGraph_t graph,
                                      kiln::hip::hipGraphNode_t *, char *,
                                      size_t) {
  *exec = reinterpret_cast<kiln::hip::hipGraphExec_t>(
      new Graph(*reinterpret_cast<Graph *>(graph)));
  return 0;
}
EXPORT hipError_t hipGraphLaunch(kiln::hip::hipGraphExec_t exec,
                                 hipStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex);
  if (capturing.count(stream))
    return kCaptureUnsupported;
  for (const Recorded &r : reinterpret_cast<Graph *>(exec)->launches)
    if (hipError_t e = run(r.function, r.grid, r.args.data(), r.args.size()))
      return e;
  return 0;
}
EXPORT hipError_t hipGraphExecDestroy(kiln::hip::hipGraphExec_t exec) {
  delete reinterpret_cast<Graph *>(exec);
  return 0;
}
EXPORT hipError_t hipGraphDestroy(kiln::hip::hipGraph_t graph) {
  delete reinterpret_cast<Graph *>(graph);
  return 0;
}

EXPORT hipError_t hipMalloc(void **p, size_t size) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!capturing.empty())
    return kCaptureUnsupported;
  *p = kiln::interp_hip::allocate(size);
  if (!*p)
    return kOutOfMemory;
  allocations[reinterpret_cast<uintptr_t>(*p)] = size;
  return 0;
}
/// The interpreter's device memory is the host's; it says 8 GiB.
/// KILN_INTERP_HIP_MEMINFO_FAILS makes it fail, as a driver that cannot
/// answer would.
EXPORT hipError_t hipMemGetInfo(size_t *free, size_t *total) {
  if (std::getenv("KILN_INTERP_HIP_MEMINFO_FAILS"))
    return 1; // hipErrorInvalidValue
  *free = *total = size_t(8) << 30;
  return 0;
}
EXPORT hipError_t hipFree(void *p) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == allocations.end())
    return p ? kInvalidValue : 0;
  kiln::interp_hip::release(p, it->second);
  allocations.erase(it);
  return 0;
}
/// A host-to-device copy from a file mapping (an artifact's weights) maps
/// the file's pages copy-on-write instead (InterpHipMemory.h).
EXPORT hipError_t hipMemcpy(void *dst, const void *src, size_t size,
                            hipMemcpyKind kind) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!capturing.empty())
    return kCaptureUnsupported;
  if (kind == kiln::hip::hipMemcpyHostToDevice && bytesFrom(dst) >= size)
    kiln::interp_hip::copyIn(dst, src, size);
  else
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
EXPORT hipError_t hipStreamSynchronize(hipStream_t) { return 0; }
/// Launches run to completion when made: the stream is done, unless
/// KILN_INTERP_HIP_STREAM_STUCK says to stand for a GPU whose queued work
/// never ends (a collective whose peer died).
EXPORT hipError_t hipStreamQuery(hipStream_t) {
  return std::getenv("KILN_INTERP_HIP_STREAM_STUCK") ? 600 // hipErrorNotReady
                                                     : 0;
}
EXPORT const char *hipGetErrorString(hipError_t error) {
  switch (error) {
  case kNotFound:
    return "hipErrorNotFound";
  case kInvalidImage:
    return "hipErrorInvalidImage";
  case kCaptureUnsupported:
    return "hipErrorStreamCaptureUnsupported (a stream is capturing)";
  case kIllegalState:
    return "hipErrorIllegalState";
  case kLaunchFailure:
    return "hipErrorLaunchFailure (the interpreter rejected the kernel; see "
           "stderr)";
  default:
    return "hipErrorUnknown";
  }
}
