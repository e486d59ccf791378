//===- HostKernels.cpp - Compiled x86-64 kernels from the artifact --------===//

#include "runtime/engine/HostKernels.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

namespace kiln::engine {

bool HostKernels::cpuSupported() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

HostKernels::~HostKernels() {
  if (handle_)
    dlclose(handle_);
  if (fd_ >= 0)
    close(fd_);
}

int HostKernels::count() const {
  return (silu != nullptr) + (sigmoid != nullptr) + (relu != nullptr) +
         (scale != nullptr) + (add != nullptr) + (mul != nullptr) +
         (rmsNorm != nullptr);
}

Result<std::unique_ptr<HostKernels>> HostKernels::load(
    const uint8_t *data, size_t size,
    const std::vector<std::pair<abi::Kernel, std::string>> &symbols) {
  std::unique_ptr<HostKernels> h(new HostKernels());
  h->fd_ = memfd_create("kiln_host_kernels", MFD_CLOEXEC);
  if (h->fd_ < 0)
    return makeError(
        StatusCode::Internal,
        "host kernels: memfd_create failed: ", std::strerror(errno));
  for (size_t done = 0; done < size;) {
    ssize_t n = write(h->fd_, data + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return makeError(StatusCode::Internal, "host kernels: writing ", size,
                       " bytes to the memfd failed: ", std::strerror(errno));
    done += size_t(n);
  }
  std::string path = "/proc/self/fd/" + std::to_string(h->fd_);
  h->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h->handle_) {
    const char *err = dlerror();
    return makeError(StatusCode::InvalidArgument,
                     "host kernels: dlopen of the x86_64 code object failed: ",
                     err ? err : "unknown error");
  }
  for (const auto &[kernel, symbol] : symbols) {
    dlerror();
    void *fn = dlsym(h->handle_, symbol.c_str());
    if (!fn)
      return makeError(StatusCode::InvalidArgument, "host kernels: symbol '",
                       symbol, "' of kernel '",
                       abi::kKernelNames[size_t(kernel)],
                       "' is not in the x86_64 code object");
    switch (kernel) {
    case abi::Kernel::Silu:
      h->silu = reinterpret_cast<HostUnaryFn>(fn);
      break;
    case abi::Kernel::Sigmoid:
      h->sigmoid = reinterpret_cast<HostUnaryFn>(fn);
      break;
    case abi::Kernel::Relu:
      h->relu = reinterpret_cast<HostUnaryFn>(fn);
      break;
    case abi::Kernel::Scale:
      h->scale = reinterpret_cast<HostScaleFn>(fn);
      break;
    case abi::Kernel::Add:
      h->add = reinterpret_cast<HostBinaryFn>(fn);
      break;
    case abi::Kernel::Mul:
      h->mul = reinterpret_cast<HostBinaryFn>(fn);
      break;
    case abi::Kernel::RmsNorm:
      h->rmsNorm = reinterpret_cast<HostRmsNormFn>(fn);
      break;
    default:
      break; // no host ABI here yet: the built-in runs
    }
  }
  return h;
}

Result<std::unique_ptr<HostKernels>>
HostKernels::fromArtifact(const artifact::Artifact &artifact,
                          std::string *note) {
  const fb::Artifact &meta = *artifact.meta();
  const auto *objects = meta.code_objects();
  if (!objects)
    return std::unique_ptr<HostKernels>();
  int64_t index = -1;
  for (uint32_t i = 0; i < objects->size(); ++i) {
    const fb::CodeObject *o = objects->Get(i);
    if (o->target() && o->target()->str() == kTarget && o->data()) {
      index = i;
      break;
    }
  }
  if (index < 0)
    return std::unique_ptr<HostKernels>();
  if (!cpuSupported()) {
    if (note)
      *note = "the CPU lacks AVX2/FMA (x86-64-v3): the compiled host kernels "
              "are not used, the built-in kernels run";
    return std::unique_ptr<HostKernels>();
  }
  std::vector<std::pair<abi::Kernel, std::string>> symbols;
  if (const auto *kernels = meta.kernels())
    for (const fb::Kernel *k : *kernels) {
      abi::Kernel kernel;
      if (!k->name() || !k->symbols() ||
          !abi::kernelFromName(k->name()->string_view(), kernel))
        continue;
      for (const fb::KernelSymbol *s : *k->symbols())
        if (s->target() && s->target()->str() == kTarget && s->symbol() &&
            s->code_object() == uint32_t(index))
          symbols.emplace_back(kernel, s->symbol()->str());
    }
  const fb::CodeObject *o = objects->Get(uint32_t(index));
  return load(artifact.bytes(*o->data()), o->data()->size(), symbols);
}

} // namespace kiln::engine
