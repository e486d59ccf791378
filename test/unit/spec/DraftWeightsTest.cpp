//===- DraftWeightsTest.cpp - The draft's weights at the draft's precision ===//
//
// On a compiled fixture (KILN_TEST_ARTIFACT), the weights only the draft
// plan reads get cpu::WeightView::int8Activations (on CPUs with AVX-512
// VNNI it makes their MXFP4 matmuls take int8 activations), and no weight a
// target plan reads does; LoadOptions::draftInt8Activations = false leaves
// every weight as cpu::mxfp4Activations() says. On the artifact compiled
// with --quantize-policy=mtp the draft reads MXFP4 weights of its own,
// including its copy of the head.
//
//===----------------------------------------------------------------------===//

#include "runtime/engine/Model.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

using namespace kiln;
using namespace kiln::engine;

namespace {

/// Weight indices the steps of plan `name` read.
std::set<uint32_t> weightsOf(const Model &model, const char *name) {
  std::set<uint32_t> used;
  for (const Step &s : model.plan(name)->steps())
    for (const fb::Arg &a : s.args)
      if (a.kind() == fb::ArgKind::Weight)
        used.insert(a.index());
  return used;
}

std::unique_ptr<Model> load(bool draftInt8) {
  const char *path = std::getenv("KILN_TEST_ARTIFACT");
  if (!path)
    return nullptr;
  LoadOptions o;
  o.threads = 1;
  o.draftInt8Activations = draftInt8;
  auto m = Model::load(path, o);
  EXPECT_TRUE(m.isOk()) << m.status().toString();
  return m.isOk() ? std::move(m).value() : nullptr;
}

TEST(DraftWeights, OnlyTheDraftsOwnWeightsTakeInt8) {
  auto model = load(true);
  if (!model)
    GTEST_SKIP() << "set KILN_TEST_ARTIFACT to a compiled fixture";
  ASSERT_TRUE(model->hasPlan(kDraftPlan));
  std::set<uint32_t> draft = weightsOf(*model, kDraftPlan);
  std::set<uint32_t> target = weightsOf(*model, kPrefillPlan);
  for (uint32_t i : weightsOf(*model, kDecodePlan))
    target.insert(i);
  int64_t own = 0, ownMx = 0;
  for (uint32_t i = 0; i < model->artifact().meta()->weights()->size(); ++i) {
    const BoundWeight &w = model->weight(i);
    bool draftOnly = draft.count(i) && !target.count(i);
    EXPECT_EQ(w.view.int8Activations, draftOnly) << w.name;
    own += draftOnly;
    ownMx += draftOnly && w.view.format == cpu::WeightFormat::MXFP4;
  }
  EXPECT_GT(own, 0); // the MTP layer
  if (std::getenv("KILN_TEST_DRAFT_MXFP4")) {
    EXPECT_GT(ownMx, 0);
    // The head: a vocab-row matrix the draft reads and the target does not.
    bool head = false;
    for (uint32_t i : draft)
      head |= !target.count(i) && model->weight(i).name == "lm_head.weight";
    EXPECT_TRUE(head);
  }
}

TEST(DraftWeights, OffLeavesEveryWeightAsConfigured) {
  auto model = load(false);
  if (!model)
    GTEST_SKIP() << "set KILN_TEST_ARTIFACT to a compiled fixture";
  for (uint32_t i = 0; i < model->artifact().meta()->weights()->size(); ++i)
    EXPECT_FALSE(model->weight(i).view.int8Activations)
        << model->weight(i).name;
}

} // namespace
