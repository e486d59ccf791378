//===- AllReduceMpiTest.cpp - A plan's all_reduce across MPI ranks -------===//
//
// Run by ctest under mpirun (-np 2 and -np 4). Every rank loads the same
// allReduceModel() artifact with the MPI communicator and runs the prefill
// plan on its own tokens; the all_reduce after the embedding must give
// every rank the sum of all ranks' embedding rows, added in rank order (the
// same bits as the serial sum), the same on every run and thread count.
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

/// Rank r's tokens: two ids of its own.
std::vector<int32_t> idsOf(int r) { return {int32_t(1 + r % 7), 9}; }

std::vector<float> embedRow(const TinyModel &m, int32_t id) {
  std::vector<float> row(8);
  std::memcpy(row.data(), m.weights[kEmbed].data.data() + id * 8 * 4, 8 * 4);
  return row;
}

Result<std::vector<float>> hiddenOf(const std::string &path, int threads) {
  LoadOptions options;
  options.threads = threads;
  options.comm = gComm;
  KILN_ASSIGN_OR_RETURN(auto model, Model::load(path, options));
  std::vector<int32_t> ids = idsOf(gComm->rank()), seqs = {0, 0}, pos = {0, 1},
                       rows = {0, 1};
  PlanInputs in;
  in.tokenIds = ids.data();
  in.seqIds = seqs.data();
  in.positions = pos.data();
  in.tokens = 2;
  in.logitRows = rows.data();
  in.logitCount = 2;
  KILN_ASSIGN_OR_RETURN(PlanOutputs out, model->run("prefill", in));
  return std::vector<float>(out.hidden, out.hidden + 2 * 8);
}

TEST(AllReduceMpi, SumsEveryRanksRowsInRankOrder) {
  TinyModel m = allReduceModel();
  m.ranks = gComm->size();
  m.rank = gComm->rank();
  std::string path = tempPath("all-reduce.kiln");
  ASSERT_TRUE(writeTinyArtifact(path, m).isOk());
  std::vector<float> expect(16, 0.0f);
  for (int r = 0; r < gComm->size(); ++r)
    for (int t = 0; t < 2; ++t) {
      std::vector<float> row = embedRow(m, idsOf(r)[t]);
      for (int i = 0; i < 8; ++i)
        expect[t * 8 + i] = r == 0 ? row[i] : expect[t * 8 + i] + row[i];
    }
  auto one = hiddenOf(path, 1);
  auto two = hiddenOf(path, 2);
  std::remove(path.c_str());
  ASSERT_TRUE(one.isOk()) << one.status().toString();
  ASSERT_TRUE(two.isOk()) << two.status().toString();
  EXPECT_EQ(std::memcmp(one->data(), expect.data(), 16 * 4), 0)
      << "rank " << gComm->rank() << ": not the rank-order sum";
  EXPECT_EQ(std::memcmp(one->data(), two->data(), 16 * 4), 0)
      << "rank " << gComm->rank() << ": 1 and 2 threads differ";
}

} // namespace

int main(int argc, char **argv) {
  return kiln::comm::test::runOnEveryRank(argc, argv, "AllReduceMpiTest",
                                          gComm);
}
