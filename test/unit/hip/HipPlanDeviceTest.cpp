//===- HipPlanDeviceTest.cpp - Plans on the GPU, against a fake HIP -------===//
//
// A tiny artifact (test/unit/engine/TinyArtifact) with a gfx950 code object
// and one launch per kernel, run by HipPlanDevice over the stand-in
// libamdhip64 (FakeHip.cpp): which code object loads, the refusal of a
// dispatch without a kernel, the launches a plan call makes (grids from the
// rows, bound arguments), sequence lengths kept by the device, slots, and
// Model::attachDevice's precondition.
//
//===----------------------------------------------------------------------===//

#include "runtime/hip/HipPlanDevice.h"
#include "test/unit/engine/TinyArtifact.h"
#include "test/unit/hip/FakeHip.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

using namespace kiln;
using namespace kiln::engine;
using namespace kiln::engine::test;
using namespace kiln::hip;

namespace {

const std::vector<std::string> kAllKernels = {
    "embedding", "rms_norm",  "kv_append", "gqa_attention",
    "add",       "take_rows", "matmul"};

/// The attention model with a gfx950 code object and launches for
/// `kernels`, loaded; null on failure.
std::unique_ptr<Model> load(const std::vector<std::string> &kernels,
                            std::string &path) {
  TinyModel m = attentionModel({"prefill"});
  m.gpuCode = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
  m.gpuKernels = kernels;
  path = tempPath("hip.kiln");
  Status written = writeTinyArtifact(path, m);
  EXPECT_TRUE(written.isOk()) << written.toString();
  auto model = Model::load(path, 1);
  EXPECT_TRUE(model.isOk()) << model.status().toString();
  return model.isOk() ? std::move(model).value() : nullptr;
}

HipPlanOptions fakeOptions() {
  HipPlanOptions options;
  options.device.libraries = {KILN_FAKE_HIP};
  options.capacity = 16;
  return options;
}

class HipPlanDeviceTest : public ::testing::Test {
protected:
  void SetUp() override { setenv("KILN_FAKE_HIP_DEVICES", "1", 1); }
  void TearDown() override {
    unsetenv("KILN_FAKE_HIP_DEVICES");
    if (!path_.empty())
      std::remove(path_.c_str());
  }
  FakeLaunch *lastLaunch(const char *library = KILN_FAKE_HIP) {
    void *lib = dlopen(library, RTLD_NOW | RTLD_NOLOAD);
    if (!lib)
      return nullptr;
    auto *launch =
        static_cast<FakeLaunch *>(dlsym(lib, "kiln_fake_hip_last_launch"));
    dlclose(lib);
    return launch;
  }
  std::string path_;
};

struct Prompt {
  std::vector<int32_t> ids, seqs, pos, rows;
  PlanInputs inputs() const {
    PlanInputs in;
    in.tokenIds = ids.data();
    in.seqIds = seqs.data();
    in.positions = pos.data();
    in.tokens = int64_t(ids.size());
    in.logitRows = rows.data();
    in.logitCount = int64_t(rows.size());
    return in;
  }
};

Prompt prompt(int32_t seq, int32_t n) {
  Prompt p;
  for (int32_t i = 0; i < n; ++i) {
    p.ids.push_back(1 + i);
    p.seqs.push_back(seq);
    p.pos.push_back(i);
  }
  p.rows = {n - 1};
  return p;
}

TEST_F(HipPlanDeviceTest, RefusesADispatchWithoutAKernel) {
  std::vector<std::string> kernels = kAllKernels;
  kernels.erase(std::find(kernels.begin(), kernels.end(), "gqa_attention"));
  auto model = load(kernels, path_);
  ASSERT_TRUE(model);
  auto device = HipPlanDevice::create(*model, fakeOptions());
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().code(), StatusCode::FailedPrecondition);
  const std::string &message = device.status().message();
  EXPECT_NE(message.find("plan 'prefill' dispatches["), std::string::npos)
      << message;
  EXPECT_NE(message.find("] gqa_attention"), std::string::npos) << message;
  EXPECT_NE(message.find("has no gfx950 kernel in this artifact"),
            std::string::npos)
      << message;
}

TEST_F(HipPlanDeviceTest, RefusesATargetTheArtifactLacks) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  HipPlanOptions options = fakeOptions();
  options.target = "gfx942";
  auto device = HipPlanDevice::create(*model, options);
  ASSERT_FALSE(device.isOk());
  EXPECT_NE(device.status().message().find(
                "the GPU loads none of the artifact's code objects for gfx942"),
            std::string::npos)
      << device.status().toString();
}

TEST_F(HipPlanDeviceTest, RunsEachDispatchAsItsLaunches) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  auto device = HipPlanDevice::create(*model, fakeOptions());
  ASSERT_TRUE(device.isOk()) << device.status().toString();
  EXPECT_EQ(device.value()->name(), "hip:gfx950");
  ASSERT_TRUE(model->attachDevice(std::move(device).value()).isOk());
  FakeLaunch *launch = lastLaunch();
  ASSERT_NE(launch, nullptr);
  int before = launch->launches;

  Prompt p = prompt(0, 3);
  auto out = model->run("prefill", p.inputs());
  ASSERT_TRUE(out.isOk()) << out.status().toString();
  EXPECT_EQ(launch->launches - before,
            int(model->plan("prefill")->steps().size()));
  // The last dispatch is the lm_head matmul over the one selected row: grid
  // (R = 1, 1, 1), 64 threads, its input pointer then R.
  EXPECT_EQ(launch->grid[0], 1u);
  EXPECT_EQ(launch->block[0], 64u);
  ASSERT_EQ(launch->argBytes, 12u);
  int32_t rows;
  std::memcpy(&rows, launch->args + 8, 4);
  EXPECT_EQ(rows, 1);
  EXPECT_EQ(out.value().logitRows, 1);

  // The device keeps the sequence lengths; rollback is a length change.
  EXPECT_EQ(model->sequenceLength(0), 3);
  model->truncate(0, 1);
  EXPECT_EQ(model->sequenceLength(0), 1);
  Prompt skip = prompt(0, 3);
  skip.pos = {2, 3, 4};
  auto skipped = model->run("prefill", skip.inputs());
  ASSERT_FALSE(skipped.isOk());
  EXPECT_NE(skipped.status().message().find(
                "plan 'prefill' on hip:gfx950: positions[0] = 2 for "
                "sequence 0 skips past its length 1"),
            std::string::npos)
      << skipped.status().toString();
}

TEST_F(HipPlanDeviceTest, GraphsReplayAShapeSeenTwiceUntilAnAllocation) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  HipPlanOptions options = fakeOptions();
  options.device.libraries = {KILN_FAKE_HIP_GRAPHS};
  auto created = HipPlanDevice::create(*model, options);
  ASSERT_TRUE(created.isOk()) << created.status().toString();
  HipPlanDevice *device = created.value().get();
  ASSERT_TRUE(model->attachDevice(std::move(created).value()).isOk());
  FakeLaunch *fake = lastLaunch(KILN_FAKE_HIP_GRAPHS);
  ASSERT_NE(fake, nullptr);
  const int steps = int(model->plan("prefill")->steps().size());

  // One prefill of `n` tokens on an empty sequence 0: every dispatch's
  // kernel runs once, whether launched one by one or as a graph.
  auto call = [&](int32_t n) {
    const int before = fake->launches;
    Prompt p = prompt(0, n);
    auto out = model->run("prefill", p.inputs());
    EXPECT_TRUE(out.isOk()) << out.status().toString();
    EXPECT_EQ(fake->launches - before, steps) << n << " tokens";
    model->truncate(0, 0);
  };
  call(2); // first of its shape: kernel by kernel
  EXPECT_EQ(device->graphsCaptured(), 0);
  EXPECT_EQ(device->graphLaunches(), 0);
  call(2); // second: captured, then launched as one graph
  EXPECT_EQ(device->graphsCaptured(), 1);
  EXPECT_EQ(device->graphLaunches(), 1);
  EXPECT_EQ(fake->captures, 1);
  call(2); // third: the graph again
  EXPECT_EQ(device->graphsCaptured(), 1);
  EXPECT_EQ(device->graphLaunches(), 2);
  EXPECT_EQ(fake->graphLaunches, 2);
  // More tokens than the buffers hold: they grow, which drops the graphs
  // (they hold the old addresses); the 2-token shape starts over.
  call(6);
  call(2);
  EXPECT_EQ(device->graphLaunches(), 2);
  call(2);
  EXPECT_EQ(device->graphsCaptured(), 2);
  EXPECT_EQ(device->graphLaunches(), 3);
}

TEST_F(HipPlanDeviceTest, GraphsCanBeTurnedOff) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  HipPlanOptions options = fakeOptions();
  options.device.libraries = {KILN_FAKE_HIP_GRAPHS};
  setenv("KILN_HIP_GRAPHS", "0", 1);
  auto created = HipPlanDevice::create(*model, options);
  unsetenv("KILN_HIP_GRAPHS");
  ASSERT_TRUE(created.isOk()) << created.status().toString();
  HipPlanDevice *device = created.value().get();
  ASSERT_TRUE(model->attachDevice(std::move(created).value()).isOk());
  for (int i = 0; i < 3; ++i) {
    Prompt p = prompt(0, 2);
    ASSERT_TRUE(model->run("prefill", p.inputs()).isOk());
    model->truncate(0, 0);
  }
  EXPECT_EQ(device->graphsCaptured(), 0);
  EXPECT_EQ(device->graphLaunches(), 0);
}

TEST_F(HipPlanDeviceTest, SlotsAndCapacityAreLimits) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  HipPlanOptions options = fakeOptions();
  options.slots = 1;
  options.capacity = 4;
  auto device = HipPlanDevice::create(*model, options);
  ASSERT_TRUE(device.isOk()) << device.status().toString();
  ASSERT_TRUE(model->attachDevice(std::move(device).value()).isOk());

  auto tooLong = model->run("prefill", prompt(0, 5).inputs());
  ASSERT_FALSE(tooLong.isOk());
  EXPECT_NE(tooLong.status().message().find(
                "positions[4] = 4, expected 0 to 3 (the device caches hold 4 "
                "positions per sequence)"),
            std::string::npos)
      << tooLong.status().toString();

  ASSERT_TRUE(model->run("prefill", prompt(0, 2).inputs()).isOk());
  auto second = model->run("prefill", prompt(1, 2).inputs());
  ASSERT_FALSE(second.isOk());
  EXPECT_EQ(second.status().code(), StatusCode::ResourceExhausted);
  EXPECT_NE(second.status().message().find(
                "sequence 1 needs a cache slot, and all 1 are in use"),
            std::string::npos)
      << second.status().toString();
  // Closing the first sequence frees its slot.
  model->closeSequence(0);
  EXPECT_TRUE(model->run("prefill", prompt(1, 2).inputs()).isOk());
}

TEST_F(HipPlanDeviceTest, ThePagePoolAndItsLimits) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  auto device = HipPlanDevice::create(*model, fakeOptions());
  ASSERT_TRUE(device.isOk()) << device.status().toString();
  EXPECT_EQ(device.value()->pageRows(), 16); // at most the capacity
  ASSERT_TRUE(model->attachDevice(std::move(device).value()).isOk());
  std::vector<int32_t> pages = {5, 2, 0, 1, 3};

  Status early = model->setPageTable(0, pages.data(), 1, 1, 0);
  EXPECT_EQ(early.code(), StatusCode::FailedPrecondition);
  EXPECT_NE(early.message().find("setPageTable before usePool"),
            std::string::npos)
      << early.toString();
  // The pool replaces the caches only while no sequence holds rows.
  ASSERT_TRUE(model->run("prefill", prompt(0, 2).inputs()).isOk());
  Status busy = model->usePool(6, 4);
  EXPECT_NE(busy.message().find("sequence 0 already holds rows"),
            std::string::npos)
      << busy.toString();
  model->closeSequence(0);
  Status huge = model->usePool(int64_t(1) << 20, 1 << 12);
  EXPECT_EQ(huge.code(), StatusCode::InvalidArgument);
  EXPECT_NE(huge.message().find("a pool of 1048576 pages of 4096 rows, "
                                "expected pages x rows below 2^31"),
            std::string::npos)
      << huge.toString();
  ASSERT_TRUE(model->usePool(6, 4).isOk());

  // Sequence 0 holds pages 5 and 2: six rows, then two more appended.
  ASSERT_TRUE(model->setPageTable(0, pages.data(), 2, 6, 0).isOk());
  EXPECT_EQ(model->sequenceLength(0), 6);
  Prompt next = prompt(0, 2);
  next.pos = {6, 7};
  ASSERT_TRUE(model->run("prefill", next.inputs()).isOk());
  EXPECT_EQ(model->sequenceLength(0), 8);
  // Rows past the table's pages, or of a sequence without a table, are
  // refused before anything runs.
  Prompt past = prompt(0, 1);
  past.pos = {8};
  auto pastOut = model->run("prefill", past.inputs());
  ASSERT_FALSE(pastOut.isOk());
  EXPECT_NE(pastOut.status().message().find(
                "positions[0] = 8 of sequence 0 is past the 2 page(s) of 4 "
                "rows its page table holds"),
            std::string::npos)
      << pastOut.status().toString();
  auto noTable = model->run("prefill", prompt(3, 1).inputs());
  ASSERT_FALSE(noTable.isOk());
  EXPECT_NE(noTable.status().message().find(
                "sequence 3 has no page table in the pool"),
            std::string::npos)
      << noTable.status().toString();

  // 16 positions per sequence are 4 pages of 4.
  Status tooMany = model->setPageTable(1, pages.data(), 5, 1, 0);
  EXPECT_EQ(tooMany.code(), StatusCode::ResourceExhausted);
  EXPECT_NE(tooMany.message().find(
                "sequence 1 needs 5 pages of 4 rows, and the device's page "
                "table holds 4 (16 positions per sequence)"),
            std::string::npos)
      << tooMany.toString();
  std::vector<int32_t> outside = {6};
  Status bad = model->setPageTable(1, outside.data(), 1, 1, 0);
  EXPECT_NE(bad.message().find("sequence 1 page 0 is 6, expected 0 to 5"),
            std::string::npos)
      << bad.toString();
  Status rows = model->setPageTable(1, pages.data(), 1, 5, 0);
  EXPECT_NE(rows.message().find("sequence 1 holds 5 main and 0 draft rows in "
                                "1 pages of 4"),
            std::string::npos)
      << rows.toString();
  // An empty table for a sequence the device does not know takes no slot.
  EXPECT_TRUE(model->setPageTable(9, pages.data(), 0, 0, 0).isOk());
  EXPECT_EQ(model->sequenceLength(9), 0);
}

TEST_F(HipPlanDeviceTest, PageRowsOptionIsChecked) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  HipPlanOptions options = fakeOptions();
  options.pageRows = 0;
  auto device = HipPlanDevice::create(*model, options);
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.status().message(),
            "HIP device: pages of 0 rows, expected 1 to 65536");
  // Pages are rounded to the capacity: 16 positions hold pages of 16.
  options.pageRows = 64;
  device = HipPlanDevice::create(*model, options);
  ASSERT_TRUE(device.isOk()) << device.status().toString();
  EXPECT_EQ(device.value()->pageRows(), 16);
  EXPECT_EQ(device.value()->capacity(), 16);
}

TEST_F(HipPlanDeviceTest, AttachesOnlyBeforeAnySequenceHoldsRows) {
  auto model = load(kAllKernels, path_);
  ASSERT_TRUE(model);
  auto seq = model->openSequence();
  ASSERT_TRUE(seq.isOk());
  ASSERT_TRUE(model->run("prefill", prompt(seq.value(), 2).inputs()).isOk());
  auto device = HipPlanDevice::create(*model, fakeOptions());
  ASSERT_TRUE(device.isOk()) << device.status().toString();
  Status attached = model->attachDevice(std::move(device).value());
  EXPECT_EQ(attached.code(), StatusCode::FailedPrecondition);
  EXPECT_NE(attached.message().find("sequence 0 already holds rows"),
            std::string::npos)
      << attached.toString();
  EXPECT_EQ(model->device(), nullptr);
}

} // namespace
