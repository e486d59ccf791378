//===- RowExchangeMpiTest.cpp - Data-parallel plan calls over MPI ---------===//
//
// Run by ctest under mpirun (-np 2, 3 and 4; with 4, groups of 2 ranks
// share their tokens, as tensor parallelism inside data-parallel attention
// has them). Every rank loads its rowExchangeModel() artifact and runs the
// prefill plan on its group's tokens, group g holding g + 1 of them, while
// the last group first stays idle (Model::idle joins the call with no
// tokens) and then runs too. Each rank's hidden output must be the sum, in
// rank order, of every rank's scaled copy of its group's embedding rows
// (the same bits as the serial sum), whatever the thread count. Then the
// errors: bad inputs on one group (its ranks fail alone, the others' call
// goes on), a group size the artifact does not have, ranks of one group with
// different tokens, a group sum over rows that are not tokens.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommFactory.h"
#include "runtime/engine/Model.h"
#include "test/unit/comm/MpiGtestMain.h"
#include "test/unit/engine/TinyArtifact.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

using namespace kiln;
using namespace kiln::engine;
using namespace kiln::engine::test;

namespace {

comm::Communicator *gComm = nullptr;

/// Ranks per group: 2 with 4 ranks, else 1.
int groupSize() { return gComm->size() == 4 ? 2 : 1; }

/// Group r's tokens: r + 1 ids of its own.
std::vector<int32_t> idsOf(int r) {
  std::vector<int32_t> ids;
  for (int t = 0; t <= r; ++t)
    ids.push_back(int32_t(1 + (3 * r + t) % 15));
  return ids;
}

/// Rank r's rows as every rank's scaled copy of them, summed in rank order.
std::vector<float> expected(const TinyModel &m, int r) {
  std::vector<int32_t> ids = idsOf(r);
  std::vector<float> sum(ids.size() * 8, 0.0f);
  for (size_t t = 0; t < ids.size(); ++t)
    for (int i = 0; i < 8; ++i) {
      float e;
      std::memcpy(&e, m.weights[kEmbed].data.data() + (ids[t] * 8 + i) * 4, 4);
      float acc = e * 1.0f;
      for (int p = 1; p < gComm->size(); ++p)
        acc += e * float(p + 1);
      sum[t * 8 + i] = acc;
    }
  return sum;
}

/// One data-parallel call: this rank's rows of the result, or none when
/// `run` is false (the rank joins with no tokens). The tokens are its
/// group's, or `ids` when given.
Result<std::vector<float>> call(Model &model, bool run,
                                std::vector<int32_t> ids = {}) {
  std::vector<float> rows;
  if (run) {
    if (ids.empty())
      ids = idsOf(gComm->rank() / groupSize());
    std::vector<int32_t> seqs(ids.size(), 0), pos(ids.size()), sel(ids.size());
    for (size_t t = 0; t < ids.size(); ++t)
      pos[t] = sel[t] = int32_t(t);
    PlanInputs in;
    in.tokenIds = ids.data();
    in.seqIds = seqs.data();
    in.positions = pos.data();
    in.tokens = int64_t(ids.size());
    in.logitRows = sel.data();
    in.logitCount = int64_t(ids.size());
    KILN_ASSIGN_OR_RETURN(PlanOutputs out, model.run("prefill", in));
    rows.assign(out.hidden, out.hidden + out.hiddenRows * out.hiddenSize);
  }
  KILN_RETURN_IF_ERROR(model.idle());
  return rows;
}

/// `m` written as this rank's artifact and loaded on `threads` threads.
Result<std::unique_ptr<Model>> load(const TinyModel &m,
                                    int threads = LoadOptions().threads) {
  std::string path = tempPath("row-exchange.kiln");
  KILN_RETURN_IF_ERROR(writeTinyArtifact(path, m));
  LoadOptions options;
  options.threads = threads;
  options.comm = gComm;
  Result<std::unique_ptr<Model>> model = Model::load(path, options);
  std::remove(path.c_str());
  return model;
}

TEST(RowExchangeMpi, EachRankGetsTheRankOrderSumOfItsOwnRows) {
  const int rank = gComm->rank(), group = rank / groupSize(),
            last = gComm->size() / groupSize() - 1;
  TinyModel m = rowExchangeModel(gComm->size(), rank, groupSize());
  std::vector<float> want = expected(m, group);
  for (int threads : {1, 2}) {
    auto model = load(m, threads);
    ASSERT_TRUE(model.isOk()) << model.status().toString();
    // The last group idle: the others' rows still pass through its share.
    auto first = call(**model, group != last);
    ASSERT_TRUE(first.isOk()) << first.status().toString();
    if (group == last) {
      EXPECT_TRUE(first->empty());
      EXPECT_EQ((*model)->idlePlanCalls(), 1);
    } else {
      ASSERT_EQ(first->size(), want.size());
      EXPECT_EQ(std::memcmp(first->data(), want.data(), want.size() * 4), 0)
          << "rank " << rank << ", " << threads << " threads: not the "
          << "rank-order sum";
    }
    // Every rank with its own tokens.
    auto second = call(**model, true);
    ASSERT_TRUE(second.isOk()) << second.status().toString();
    ASSERT_EQ(second->size(), want.size());
    EXPECT_EQ(std::memcmp(second->data(), want.data(), want.size() * 4), 0)
        << "rank " << rank << ", " << threads << " threads";
  }
}

TEST(RowExchangeMpi, BadInputsFailOnTheirGroupAloneAndTheOthersGoOn) {
  const int rank = gComm->rank(), group = rank / groupSize(),
            last = gComm->size() / groupSize() - 1;
  TinyModel m = rowExchangeModel(gComm->size(), rank, groupSize());
  auto model = load(m);
  ASSERT_TRUE(model.isOk()) << model.status().toString();
  // The last group asks with a token id past the vocabulary: its ranks get
  // the error before meeting the others, then join their call with no
  // tokens; every other group gets its rows as if the last were idle.
  auto first =
      call(**model, true,
           group == last ? std::vector<int32_t>{99} : std::vector<int32_t>{});
  if (group == last) {
    ASSERT_FALSE(first.isOk());
    EXPECT_NE(first.status().message().find(
                  "plan 'prefill': token_ids[0] = 99, expected 0 to 15"),
              std::string::npos)
        << first.status().message();
    ASSERT_TRUE((*model)->idle().isOk());
    EXPECT_EQ((*model)->idlePlanCalls(), 1);
  } else {
    ASSERT_TRUE(first.isOk()) << first.status().toString();
    std::vector<float> want = expected(m, group);
    ASSERT_EQ(first->size(), want.size());
    EXPECT_EQ(std::memcmp(first->data(), want.data(), want.size() * 4), 0);
  }
  // The ranks are still in step: the next call runs everywhere.
  auto second = call(**model, true);
  ASSERT_TRUE(second.isOk()) << second.status().toString();
  std::vector<float> want = expected(m, group);
  ASSERT_EQ(second->size(), want.size());
  EXPECT_EQ(std::memcmp(second->data(), want.data(), want.size() * 4), 0);
}

/// Loads `m` as this rank's artifact and makes one call in which every
/// rank runs `ids` (its group's when empty); the status every rank gets.
Status callOnce(const TinyModel &m, std::vector<int32_t> ids = {}) {
  Result<std::unique_ptr<Model>> model = load(m);
  if (!model.isOk())
    return model.status();
  return call(**model, true, std::move(ids)).status();
}

TEST(RowExchangeMpi, AGroupSizeTheArtifactDoesNotHaveIsNamed) {
  // The exchange declares groups of 2, the artifact's groups have 1 rank.
  TinyModel m = rowExchangeModel(gComm->size(), gComm->rank(), 1);
  m.plans[0].dispatches[1].params = kiln::abi::AllGatherRowsParams{2};
  Status st = callOnce(m);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("all_gather_rows: the plan sums or exchanges "
                              "rows in groups of 2 ranks, but the artifact's "
                              "data-parallel groups have 1 of " +
                              std::to_string(gComm->size())),
            std::string::npos)
      << st.message();
}

TEST(RowExchangeMpi, RanksOfOneGroupWithOtherTokensAreNamed) {
  if (groupSize() == 1)
    GTEST_SKIP() << "needs groups of 2 (-np 4)";
  // Ranks 0 and 1 share a group but run 1 and 2 tokens: every rank fails
  // before the collective, naming them.
  TinyModel m = rowExchangeModel(gComm->size(), gComm->rank(), groupSize());
  Status st = callOnce(m, idsOf(gComm->rank()));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("ranks 0 and 1 of one data-parallel group run 1 "
                              "and 2 tokens"),
            std::string::npos)
      << st.message();
}

TEST(RowExchangeMpi, AGroupSumOverSelectedRowsIsRefused) {
  // An all_reduce of the selected rows: under data-parallel attention only
  // the Tokens rows of a group are summed.
  TinyModel m = rowExchangeModel(gComm->size(), gComm->rank(), 1);
  PlanSpec &p = m.plans[0];
  p.buffers.push_back({"summed", Rows::Selected, false, {8}});
  uint32_t summed = uint32_t(p.buffers.size() - 1);
  for (size_t i = 0; i < p.dispatches.size(); ++i)
    if (p.dispatches[i].kernel == Kernel::TakeRows) {
      p.dispatches.insert(p.dispatches.begin() + long(i) + 1,
                          {Kernel::AllReduce,
                           {B(6), B(summed)},
                           kiln::abi::AllReduceParams{1},
                           "sum"});
      p.dispatches[i + 2].args[0] = B(summed); // lm_head reads the sum
      break;
    }
  Status st = callOnce(m);
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("all_reduce: under data-parallel attention a sum "
                              "runs over Tokens rows, found Selected rows"),
            std::string::npos)
      << st.message();
}

} // namespace

int main(int argc, char **argv) {
  return kiln::comm::test::runOnEveryRank(argc, argv, "RowExchangeMpiTest",
                                          gComm);
}
