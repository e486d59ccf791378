//===- SignatureTest.cpp - The structural half of the kernel contract ----===//
//
// abi::signatureError() against the declarations generated from
// support/abi/Kernels.td: every kind of message, variadic expansion, and the
// generated tables themselves.
//
//===----------------------------------------------------------------------===//

#include "support/abi/Signature.h"

#include <gtest/gtest.h>

#include <set>

using namespace kiln::abi;

namespace {

ArgRef B(uint32_t i) { return {RefKind::Buffer, i}; }
ArgRef W(uint32_t i) { return {RefKind::Weight, i}; }
ArgRef C(uint32_t i) { return {RefKind::Cache, i}; }
ArgRef None() { return {RefKind::None, 0}; }

/// Buffers 0-9 are f32 named "f<i>" with 8 values per row, 10-19 i32
/// named "i<i>" with one; all have Tokens rows. Buffer 9 has Selected rows,
/// 8 has 4 values per row, 19 has 3 values per row; 20 and 21 are f32 with
/// Gathered rows, 8 and 4 values per row.
BufferFacts facts(uint32_t i) {
  BufferFacts b = i < 10 ? BufferFacts{"f" + std::to_string(i), ElemType::F32,
                                       RowsKind::Tokens, 8}
                         : BufferFacts{"i" + std::to_string(i), ElemType::I32,
                                       RowsKind::Tokens, 1};
  if (i == 9)
    b.rows = RowsKind::Selected;
  if (i == 8)
    b.width = 4;
  if (i == 19)
    b.width = 3;
  if (i == 20 || i == 21)
    b = {"g" + std::to_string(i), ElemType::F32, RowsKind::Gathered,
         i == 20 ? 8 : 4};
  return b;
}

std::string check(Kernel k, std::vector<ArgRef> args, Params params = {}) {
  return signatureError(k, args, params, facts);
}

TEST(Signature, AcceptsWellFormedDispatches) {
  EXPECT_EQ(check(Kernel::Embedding, {B(10), W(0), B(1)}), "");
  EXPECT_EQ(check(Kernel::RmsNorm, {B(0), W(0), B(0)}, RmsNormParams{1e-5f}),
            "")
      << "rms_norm may work in place";
  EXPECT_EQ(check(Kernel::Add, {W(3), B(1), B(2)}), "");
  MoeParams moe;
  EXPECT_EQ(
      check(Kernel::Moe,
            {B(0), W(0), W(1), W(2), W(3), W(4), None(), None(), None(), B(1)},
            moe),
      "")
      << "the shared expert is optional";
  EXPECT_EQ(check(Kernel::MlaAttention,
                  {B(0), B(1), W(0), C(0), B(10), B(11), None(), B(2)},
                  MlaAttentionParams{4, 0.1f}),
            "");
}

TEST(Signature, ArgCounts) {
  EXPECT_EQ(check(Kernel::Embedding, {B(10), W(0)}),
            "has 2 args, expected 3 (ids, table, out)");
  EXPECT_EQ(check(Kernel::Split, {B(0)}, SplitParams{1, 1}),
            "has 1 args, expected at least 2 (x, out...)");
  EXPECT_EQ(check(Kernel::Concat, {B(0)}, ConcatParams{1, 1}),
            "has 1 args, expected at least 2 (in..., out)");
}

TEST(Signature, KindsAndNone) {
  EXPECT_EQ(check(Kernel::Matmul, {W(0), W(1), B(2)}),
            "args[0] 'x': is a Weight, expected a Buffer");
  EXPECT_EQ(check(Kernel::Add, {C(0), B(1), B(2)}),
            "args[0] 'lhs': is a Cache, expected a Buffer or Weight");
  EXPECT_EQ(check(Kernel::Matmul, {B(0), None(), B(2)}),
            "args[1] 'weight': is None, but the argument is required");
}

TEST(Signature, ElementTypes) {
  EXPECT_EQ(check(Kernel::Embedding, {B(0), W(0), B(1)}),
            "args[0] 'ids': buffer 'f0' is F32, expected I32");
  EXPECT_EQ(check(Kernel::Argmax, {B(0), B(1)}),
            "args[1] 'out': buffer 'f1' is F32, expected I32");
  // take_rows: the output has the input's type, whichever it is.
  EXPECT_EQ(check(Kernel::TakeRows, {B(12), B(10), B(13)}), "");
  EXPECT_EQ(check(Kernel::TakeRows, {B(12), B(10), B(3)}),
            "args[2] 'out': buffer 'f3' is F32, expected I32 (the type of "
            "args[0] 'x')");
  // Variadic pieces take the whole's type.
  EXPECT_EQ(check(Kernel::Concat, {B(1), B(12), B(2)}, ConcatParams{1, 1}),
            "args[1] 'in': buffer 'i12' is I32, expected F32 (the type of "
            "args[2] 'out')");
}

TEST(Signature, InPlace) {
  EXPECT_EQ(check(Kernel::Matmul, {B(1), W(0), B(1)}),
            "args[2] 'out': is the same buffer as args[0] 'x', but matmul "
            "cannot work in place");
  EXPECT_EQ(check(Kernel::Split, {B(1), B(2), B(1)}, SplitParams{1, 1}),
            "args[2] 'out': is the same buffer as args[0] 'x', but split "
            "cannot work in place");
  EXPECT_EQ(check(Kernel::Silu, {B(1), B(1)}), "") << "silu works in place";
}

TEST(Signature, Params) {
  EXPECT_EQ(check(Kernel::RmsNorm, {B(0), W(0), B(1)}),
            "params: holds none, expected rms_norm's (eps)");
  EXPECT_EQ(check(Kernel::RmsNorm, {B(0), W(0), B(1)}, LayerNormParams{1e-5f}),
            "params: holds layer_norm's parameters, expected rms_norm's (eps)");
  EXPECT_EQ(check(Kernel::Silu, {B(0), B(1)}, ScaleParams{2.0f}),
            "params: holds scale's parameters, expected none");
}

TEST(Signature, RowRules) {
  // rms_norm: out is a row-for-row image of x.
  EXPECT_EQ(check(Kernel::RmsNorm, {B(0), W(0), B(9)}, RmsNormParams{1e-5f}),
            "args[2] 'out': buffer 'f9' has Selected rows but args[0] 'x' "
            "'f0' has Tokens");
  EXPECT_EQ(check(Kernel::RmsNorm, {B(0), W(0), B(8)}, RmsNormParams{1e-5f}),
            "args[2] 'out': buffer 'f8' has 4 values per row, expected 8 (as "
            "args[0] 'x' 'f0')");
  // One value per row.
  EXPECT_EQ(check(Kernel::Embedding, {B(19), W(0), B(1)}),
            "args[0] 'ids': buffer 'i19' has 3 values per row, expected 1");
  // take_rows: out has the rows of `rows`, the width of x.
  EXPECT_EQ(check(Kernel::TakeRows, {B(0), B(10), B(1)}), "");
  EXPECT_EQ(check(Kernel::TakeRows, {B(0), B(10), B(8)}),
            "args[2] 'out': buffer 'f8' has 4 values per row, expected 8 (as "
            "args[0] 'x' 'f0')");
  // Variadic: every piece of a split.
  EXPECT_EQ(check(Kernel::Split, {B(0), B(1), B(9)}, SplitParams{1, 1}),
            "args[2] 'out': buffer 'f9' has Selected rows but args[0] 'x' "
            "'f0' has Tokens");
  // An absent optional argument is not checked.
  EXPECT_EQ(check(Kernel::MlaAttention,
                  {B(0), B(1), W(0), C(0), B(10), B(11), None(), B(2)},
                  MlaAttentionParams{4, 0.1f}),
            "");
  EXPECT_EQ(check(Kernel::MlaAttention,
                  {B(0), B(1), W(0), C(0), B(10), B(19), None(), B(2)},
                  MlaAttentionParams{4, 0.1f}),
            "args[5] 'pos': buffer 'i19' has 3 values per row, expected 1");
}

TEST(Signature, VariadicLabels) {
  EXPECT_EQ(argLabel(Kernel::Split, 0, 4), "args[0] 'x'");
  EXPECT_EQ(argLabel(Kernel::Split, 3, 4), "args[3] 'out'");
  EXPECT_EQ(argLabel(Kernel::Concat, 2, 4), "args[2] 'in'");
  EXPECT_EQ(argLabel(Kernel::Concat, 3, 4), "args[3] 'out'");
  EXPECT_EQ(argDeclAt(Kernel::Matmul, 0, 2), nullptr);
}

TEST(Contract, GeneratedTablesAgree) {
  std::set<std::string_view> names;
  for (size_t k = 0; k < size_t(Kernel::Count); ++k) {
    const KernelDecl &d = declOf(Kernel(k));
    EXPECT_EQ(d.name, kKernelNames[k]);
    EXPECT_TRUE(names.insert(d.name).second) << d.name;
    Kernel back;
    ASSERT_TRUE(kernelFromName(d.name, back));
    EXPECT_EQ(back, Kernel(k));
    // The params alternative holds exactly the declared fields.
    Params p = defaultParams(Kernel(k));
    EXPECT_EQ(p.index(), kParamsIndex[k]) << d.name;
    EXPECT_TRUE(paramsMatch(Kernel(k), p)) << d.name;
    std::vector<std::string> fields;
    forEachParam(p, [&](const char *name, auto) { fields.push_back(name); });
    ASSERT_EQ(fields.size(), d.numParams) << d.name;
    for (size_t i = 0; i < fields.size(); ++i)
      EXPECT_EQ(fields[i], d.params[i].name) << d.name;
  }
  Kernel unknown;
  EXPECT_FALSE(kernelFromName("flash_attention", unknown));
}

} // namespace

TEST(Signature, GatheredRows) {
  // all_gather_rows: this rank's Tokens rows in, every group's out.
  const AllGatherRowsParams gather{1};
  const ReduceScatterRowsParams scatter{1};
  EXPECT_EQ(check(Kernel::AllGatherRows, {B(0), B(20)}, gather), "");
  EXPECT_EQ(check(Kernel::ReduceScatterRows, {B(20), B(1)}, scatter), "");
  EXPECT_EQ(check(Kernel::AllGatherRows, {B(0), B(1)}, gather),
            "args[1] 'out': buffer 'f1' has Tokens rows, expected Gathered "
            "(the rows of every rank of args[0] 'x')");
  EXPECT_EQ(check(Kernel::ReduceScatterRows, {B(20), B(9)}, scatter),
            "args[1] 'out': buffer 'f9' has Selected rows, expected Tokens");
  EXPECT_EQ(check(Kernel::AllGatherRows, {B(0), B(21)}, gather),
            "args[1] 'out': buffer 'g21' has 4 values per row, expected 8 (as "
            "args[0] 'x' 'f0')");
  EXPECT_STREQ(rowsKindName(RowsKind::Gathered), "Gathered");
}
