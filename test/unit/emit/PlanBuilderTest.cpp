//===- PlanBuilderTest.cpp - Fused IR to plans, from hand-written IR -----===//
//
// The plan builder's lowering of ops whose kernel declaration names them
// (Kernels.td `op`): operands in order, then results, each dispatch checked
// against the declaration as it is emitted.
//
//===----------------------------------------------------------------------===//

#include "dialects/kiln/IR/KilnOps.h"
#include "passes/emit/ProgramSpec.h"

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
  Result<ProgramSpec> program = makeError(StatusCode::Internal, "not built");
  explicit Built(const std::string &text) {
    context.loadDialect<KilnDialect, mlir::func::FuncDialect>();
    mlir::OwningOpRef<mlir::ModuleOp> m =
        mlir::parseSourceString<mlir::ModuleOp>(text, &context);
    if (!m) {
      program = makeError(StatusCode::InvalidArgument, "did not parse");
      return;
    }
    program = buildPrograms(*m);
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

} // namespace
