//===- PlanBuilderTest.cpp - Fused IR to plans, from hand-written IR -----===//
//
// The plan builder's lowering of ops whose kernel declaration names them
// (Kernels.td `op`): operands in order, then results, each dispatch checked
// against the declaration as it is emitted.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "dialects/plan/IR/PlanOps.h"
#include "passes/emit/GpuLaunch.h"
#include "passes/emit/ProgramSpec.h"
#include "passes/emit/WeightStreamer.h"
#include "test/unit/ExpectStatus.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::emit;

namespace {

/// @prefill and @decode, both `body` over the standard inputs.
std::string module(const std::string &body, const std::string &result) {
  std::string fn =
      "(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, "
      "%rows: tensor<?xi32>) -> (" +
      result + ") {\n" + body + "}\n";
  return "module {\nfunc.func @prefill" + fn + "func.func @decode" + fn + "}\n";
}

struct Built {
  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> m;
  Result<ProgramSpec> program = makeError(StatusCode::Internal, "not built");
  explicit Built(const std::string &text, const std::string &gpuTargets = "") {
    context.loadDialect<KilnDialect, mlir::func::FuncDialect>();
    m = mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    if (!m) {
      program = makeError(StatusCode::InvalidArgument, "did not parse");
      return;
    }
    program = buildPrograms(*m, /*hostKernels=*/false, gpuTargets);
  }
};

TEST(PlanBuilder, LowersDeclaredOpsByOperandOrder) {
  Built b(module(R"(
    %t = kiln.weight "embed" : tensor<16x8xf32>
    %h = kiln.embedding %t[%ids] : tensor<16x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
    %s = kiln.silu %h : tensor<?x8xf32>
    %m = kiln.softmax %s : tensor<?x8xf32>
    return %m : tensor<?x8xf32>
  )",
                 "tensor<?x8xf32>"));
  ASSERT_TRUE(b.program.isOk()) << b.program.status().toString();
  const PlanSpec &plan = b.program->plans[0];
  ASSERT_EQ(plan.dispatches.size(), 3u);
  const DispatchSpec &silu = plan.dispatches[1];
  const DispatchSpec &softmax = plan.dispatches[2];
  EXPECT_EQ(silu.kernel, kiln::abi::Kernel::Silu);
  EXPECT_EQ(softmax.kernel, kiln::abi::Kernel::Softmax);
  // silu reads the embedding's output and writes a buffer softmax reads.
  ASSERT_EQ(silu.args.size(), 2u);
  EXPECT_EQ(silu.args[0].kind, ArgKind::Buffer);
  EXPECT_EQ(silu.args[0].index, plan.dispatches[0].args[2].index);
  EXPECT_EQ(softmax.args[0].index, silu.args[1].index);
  EXPECT_NE(softmax.args[1].index, softmax.args[0].index);
  EXPECT_EQ(plan.outputs[0], softmax.args[1].index);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(silu.params));
}

TEST(PlanBuilder, LowersAllReduce) {
  Built b(module(R"(
    %t = kiln.weight "embed" : tensor<16x8xf32>
    %h = kiln.embedding %t[%ids] : tensor<16x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
    %s = kiln.all_reduce %h : tensor<?x8xf32>
    return %s : tensor<?x8xf32>
  )",
                 "tensor<?x8xf32>"));
  ASSERT_TRUE(b.program.isOk()) << b.program.status().toString();
  const PlanSpec &plan = b.program->plans[1];
  ASSERT_EQ(plan.dispatches.size(), 2u);
  const DispatchSpec &reduce = plan.dispatches[1];
  EXPECT_EQ(reduce.kernel, kiln::abi::Kernel::AllReduce);
  ASSERT_EQ(reduce.args.size(), 2u);
  EXPECT_EQ(reduce.args[0].index, plan.dispatches[0].args[2].index);
  EXPECT_EQ(plan.outputs[0], reduce.args[1].index);
}

TEST(PlanBuilder, ErrorsNameTheOp) {
  Built b(module(R"(
    %t = kiln.weight "embed" : tensor<16x8xf32>
    %h = kiln.embedding %t[%ids] : tensor<16x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
    %s = kiln.sample %h : tensor<?x8xf32> -> tensor<?xi32>
    return %h : tensor<?x8xf32>
  )",
                 "tensor<?x8xf32>"));
  ASSERT_FALSE(b.program.isOk());
  EXPECT_NE(b.program.status().message().find("no CPU kernel lowers this op"),
            std::string::npos)
      << b.program.status().message();
}

// kiln-lower-gpu-launches records what the lowering functions return for
// the weights' promised forms, and readGpuLaunches gives it back.
TEST(GpuLaunches, ReadBackAsLowered) {
  Built b(module(R"(
    %t = kiln.weight "embed" : tensor<16x64xbf16>
    %h = kiln.embedding %t[%ids] : tensor<16x64xbf16>, tensor<?xi32> -> tensor<?x64xf32>
    %s = kiln.silu %h : tensor<?x64xf32>
    %a = kiln.add %s, %h : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
    %r = kiln.all_reduce %a : tensor<?x64xf32>
    return %r : tensor<?x64xf32>
  )",
                 "tensor<?x64xf32>"),
          "cpu,gfx942");
  ASSERT_OK(b.program);
  auto read = readGpuLaunches(*b.m);
  ASSERT_OK(read);
  ASSERT_EQ(read->size(), b.program->plans.size());
  std::vector<StoredForm> forms;
  for (const WeightSpec &w : b.program->weights)
    forms.push_back(storedForm(w));
  size_t withLaunches = 0;
  for (size_t p = 0; p < read->size(); ++p) {
    const PlanSpec &plan = b.program->plans[p];
    ASSERT_EQ((*read)[p].size(), plan.dispatches.size());
    for (size_t d = 0; d < plan.dispatches.size(); ++d) {
      std::optional<GpuDispatchLowering> direct =
          lowerGpuDispatch({plan, plan.dispatches[d], *b.program, forms});
      const std::optional<GpuDispatchLowering> &recorded = (*read)[p][d];
      ASSERT_EQ(direct.has_value(), recorded.has_value()) << p << " " << d;
      if (!direct)
        continue;
      ++withLaunches;
      EXPECT_EQ(recorded->key(), direct->key());
    }
  }
  // embedding, silu, add and all_reduce (the rank-order sum) in both plans.
  EXPECT_EQ(withLaunches, 8u);
}

// Launches built in C++ rather than parsed: the rules the parser cannot
// break (whole (part, index) pairs, known parts) are the verifier's.
TEST(GpuLaunches, BuiltAttributesAreVerified) {
  mlir::MLIRContext context;
  context.loadDialect<plan::PlanDialect>();
  std::string message;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  auto build = [&](std::vector<int64_t> args) {
    message.clear();
    std::vector<int64_t> grid = {1, 0, 1, -1, 0, 1, 1, -1, 0, 1, 1, -1};
    return plan::GpuLaunchAttr::getChecked(
        [&] { return mlir::emitError(mlir::UnknownLoc::get(&context)); },
        &context, llvm::StringRef("kiln_softmax_c8"),
        llvm::ArrayRef<int64_t>(grid), llvm::ArrayRef<int64_t>(args));
  };
  EXPECT_TRUE(build({0, 0, 0, 1}));
  EXPECT_FALSE(build({0, 0, 0}));
  EXPECT_EQ(message, "launch args hold (part, index) pairs");
  EXPECT_FALSE(build({0, 0, 10, 1}));
  EXPECT_EQ(message, "launch argument 1: no GPU argument part 10");
  EXPECT_FALSE(build({0, 0, 9, 1}));
  EXPECT_EQ(message, "launch argument 1: page_rows takes no index, got 1");
  EXPECT_TRUE(build({0, 0, 8, 0, 9, 0}));
  EXPECT_FALSE(build({3, 2}));
  EXPECT_EQ(message, "launch argument 0: rows takes no index, got 2");
}

TEST(GpuLaunches, ReadingNamesABadKernelSymbol) {
  mlir::MLIRContext context;
  context.loadDialect<plan::PlanDialect>();
  auto m = mlir::parseSourceString<mlir::ModuleOp>(R"(
    kiln_plan.plan @decode {
      %a = kiln_plan.buffer tokens "t1" row [8] f32
      %b = kiln_plan.buffer tokens "t2" row [8] f32
      kiln_plan.dispatch silu(%a, %b) attributes {gpu_launches = [#kiln_plan.launch<"kiln_softmax_c0", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1]>]}
      kiln_plan.return %b
    }
  )",
                                                   &context);
  ASSERT_TRUE(m);
  EXPECT_ERROR_CONTAINS(readGpuLaunches(*m),
                        "plan 'decode' dispatch 0 (silu): launch kernel "
                        "'kiln_softmax_c0': softmax: parameter c must be "
                        "positive, got 0");
}

} // namespace
