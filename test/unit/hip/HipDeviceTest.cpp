//===- HipDeviceTest.cpp - The HIP device without ROCm --------------------===//
//
// This machine has no ROCm: open() must say so clearly. A fake
// libamdhip64 built with the test proves the symbol table, the error
// conversion and the packed launch arguments.
//
//===----------------------------------------------------------------------===//

#include "runtime/hip/HipDevice.h"
#include "test/unit/hip/FakeHip.h"

#include <gtest/gtest.h>

#include <chrono>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

using namespace kiln;
using namespace kiln::hip;

namespace {

HipDeviceOptions fake(const char *path = KILN_FAKE_HIP) {
  HipDeviceOptions options;
  options.libraries = {path};
  return options;
}

class ScopedDevices {
public:
  explicit ScopedDevices(const char *n) {
    setenv("KILN_FAKE_HIP_DEVICES", n, 1);
  }
  ~ScopedDevices() { unsetenv("KILN_FAKE_HIP_DEVICES"); }
};

TEST(HipDevice, ReportsMissingRuntime) {
  void *real = dlopen("libamdhip64.so", RTLD_NOW | RTLD_LOCAL);
  if (real) {
    dlclose(real);
    GTEST_SKIP() << "this machine has a HIP runtime";
  }
  auto device = HipDevice::open();
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), StatusCode::Unavailable);
  EXPECT_EQ(device.status().message().rfind(
                "HIP runtime (libamdhip64.so) not found: --device=hip "
                "needs ROCm; use --device=cpu",
                0),
            0u)
      << device.status().toString();
}

TEST(HipDevice, FakeRuntimeWithoutDevices) {
  // Every symbol resolves and is called: the failure is the device count.
  auto device = HipDevice::open(fake());
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), StatusCode::Unavailable);
  EXPECT_EQ(device.status().message(),
            std::string("no AMD GPU: the HIP runtime ") + KILN_FAKE_HIP +
                " reports 0 devices; --device=hip needs one, use "
                "--device=cpu");
}

TEST(HipDevice, IncompleteRuntimeIsRejected) {
  auto device = HipDevice::open(fake(KILN_FAKE_HIP_INCOMPLETE));
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), StatusCode::Unavailable);
  EXPECT_NE(
      device.status().message().find("lacks the symbol hipStreamSynchronize"),
      std::string::npos)
      << device.status().toString();
}

TEST(HipDevice, ARuntimeWithoutStreamCaptureStillRuns) {
  // The stand-in has no graph entry points: the device opens, says it
  // cannot capture, and refuses a capture by name (plans then launch
  // kernel by kernel).
  ScopedDevices devices("1");
  auto opened = HipDevice::open(fake());
  ASSERT_TRUE(opened.isOk()) << opened.status().toString();
  HipDevice &device = **opened;
  EXPECT_FALSE(device.supportsGraphs());
  Status capture = device.beginCapture();
  EXPECT_EQ(capture.code(), StatusCode::Unavailable);
  EXPECT_NE(capture.message().find("has no stream capture"), std::string::npos)
      << capture.toString();
}

TEST(HipDevice, LaunchesWithPackedArguments) {
  ScopedDevices devices("2");
  auto opened = HipDevice::open(fake());
  ASSERT_TRUE(opened.isOk()) << opened.status().toString();
  HipDevice &device = **opened;
  EXPECT_EQ(device.deviceCount(), 2);

  const unsigned char elf[16] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x40};
  auto module = device.loadModule(elf, sizeof(elf));
  ASSERT_TRUE(module.isOk()) << module.status().toString();
  auto fn = device.function(*module, "kiln_mx_gemm_n256_k512_t1x4_gfx950");
  ASSERT_TRUE(fn.isOk()) << fn.status().toString();

  auto buffer = device.allocate(64);
  ASSERT_TRUE(buffer.isOk());
  float host[16], back[16];
  for (int i = 0; i < 16; ++i)
    host[i] = float(i);
  ASSERT_TRUE(device.copyToDevice(*buffer, host, sizeof(host)).isOk());
  ASSERT_TRUE(device.copyToHost(back, *buffer, sizeof(back)).isOk());
  EXPECT_EQ(std::memcmp(host, back, sizeof(host)), 0);

  // mx_gemm's arguments: four pointers and the row count (36 bytes, as in
  // the code object's .kernarg_segment_size).
  KernelArgs args;
  args.pointer(reinterpret_cast<void *>(0x1000))
      .pointer(reinterpret_cast<void *>(0x2000))
      .pointer(reinterpret_cast<void *>(0x3000))
      .pointer(*buffer)
      .i32(17);
  EXPECT_EQ(args.size(), 36u);
  LaunchDims dims;
  dims.grid = {4, 2, 1};
  dims.block = {64, 1, 1};
  ASSERT_TRUE(device.launch(*fn, dims, args).isOk());
  ASSERT_TRUE(device.synchronize().isOk());

  void *lib = dlopen(KILN_FAKE_HIP, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(lib, nullptr);
  auto *launch =
      static_cast<FakeLaunch *>(dlsym(lib, "kiln_fake_hip_last_launch"));
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->launches, 1);
  EXPECT_EQ(launch->grid[0], 4u);
  EXPECT_EQ(launch->grid[1], 2u);
  EXPECT_EQ(launch->block[0], 64u);
  EXPECT_TRUE(launch->hasStream);
  ASSERT_EQ(launch->argBytes, 36u);
  int32_t rows;
  std::memcpy(&rows, launch->args + 32, 4);
  EXPECT_EQ(rows, 17);
  void *out;
  std::memcpy(&out, launch->args + 24, 8);
  EXPECT_EQ(out, *buffer);
  dlclose(lib);
  EXPECT_TRUE(device.release(*buffer).isOk());
}

TEST(HipDevice, ErrorsNameTheCallAndLocation) {
  ScopedDevices devices("1");
  auto opened = HipDevice::open(fake());
  ASSERT_TRUE(opened.isOk()) << opened.status().toString();
  HipDevice &device = **opened;

  const unsigned char notElf[8] = {'K', 'I', 'L', 'N'};
  auto bad = device.loadModule(notElf, sizeof(notElf));
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().code(), StatusCode::InvalidArgument);

  const unsigned char elf[8] = {0x7f, 'E', 'L', 'F'};
  auto module = device.loadModule(elf, sizeof(elf));
  ASSERT_TRUE(module.isOk());
  auto fn = device.function(*module, "missing");
  ASSERT_FALSE(fn.isOk());
  const std::string &message = fn.status().message();
  EXPECT_EQ(message.rfind("kernel 'missing': runtime/hip/HipDevice.cpp:", 0),
            0u)
      << message;
  EXPECT_NE(message.find(": hipModuleGetFunction failed with hipError_t 500 "
                         "(hipErrorNotFound)"),
            std::string::npos)
      << message;

  HipDeviceOptions other = fake();
  other.ordinal = 3;
  auto missing = HipDevice::open(other);
  ASSERT_FALSE(missing.isOk());
  EXPECT_EQ(missing.status().message(),
            "GPU 3 does not exist: the HIP runtime reports 1 device");
}

// The default GPU is the process's local rank modulo the GPUs (one GPU per
// rank of an mpirun job); an explicit ordinal wins.
TEST(HipDevice, DefaultGpuIsTheLocalRank) {
  ScopedDevices devices("2");
  setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1);
  auto byRank = HipDevice::open(fake());
  HipDeviceOptions explicitZero = fake();
  explicitZero.ordinal = 0;
  auto chosen = HipDevice::open(explicitZero);
  unsetenv("OMPI_COMM_WORLD_LOCAL_RANK");
  auto alone = HipDevice::open(fake());
  ASSERT_TRUE(byRank.isOk() && chosen.isOk() && alone.isOk());
  EXPECT_EQ((*byRank)->ordinal(), 1);
  EXPECT_EQ((*chosen)->ordinal(), 0);
  EXPECT_EQ((*alone)->ordinal(), 0);
}

// A stream that never finishes (a peer rank died inside a collective):
// the bounded wait gives up after its deadline with a message that says
// why; a finished stream returns at once.
TEST(HipDevice, BoundedWaitGivesUpOnAStuckStream) {
  ScopedDevices devices("1");
  auto opened = HipDevice::open(fake());
  ASSERT_TRUE(opened.isOk()) << opened.status().toString();
  EXPECT_TRUE((*opened)->synchronize(5.0, "").isOk());
  setenv("KILN_FAKE_HIP_STREAM_STUCK", "1", 1);
  auto start = std::chrono::steady_clock::now();
  Status stuck = (*opened)->synchronize(0.2, "a rank died");
  double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  unsetenv("KILN_FAKE_HIP_STREAM_STUCK");
  EXPECT_EQ(stuck.code(), StatusCode::Unavailable);
  EXPECT_EQ(stuck.message(), "GPU 0: its queued work did not finish within "
                             "0.2 s (a rank died)");
  EXPECT_GE(waited, 0.2);
}

} // namespace
