//===- EngineTest.cpp - The serving engine on the compiled fixture --------===//
//
// Runs when KILN_SERVE_ARTIFACT names an artifact compiled from glm5-tiny-dev
// (ctest e2e.serve compiles one). Every batched result is compared with the
// same request run alone through engine::generate (the single-sequence path
// the golden tests check), and the golden prompts with their golden tokens.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/Engine.h"
#include "runtime/engine/Generator.h"
#include "runtime/serve/EngineLoop.h"
#include "runtime/support/Npy.h"
#include "test/unit/Fixtures.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <cmath>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <thread>

namespace kiln::serve {
namespace {

using engine::Model;

struct Golden {
  std::vector<std::vector<int32_t>> prompts, greedy;
  std::vector<int32_t> eval; // 8192 token ids of text
};

const Golden &golden() {
  static Golden g = [] {
    Golden g;
    std::string dir = kilnFixture("glm5-tiny-dev/golden");
    std::ifstream p(dir + "/prompts.json"), q(dir + "/greedy.json");
    for (auto &x : nlohmann::json::parse(p))
      g.prompts.push_back(x["token_ids"].get<std::vector<int32_t>>());
    nlohmann::json greedy = nlohmann::json::parse(q);
    for (auto &x : greedy["prompts"])
      g.greedy.push_back(x["greedy_ids"].get<std::vector<int32_t>>());
    auto eval = readNpy(dir + "/eval_tokens.npy");
    if (eval.isOk())
      g.eval = *eval->toVector<int32_t>();
    return g;
  }();
  return g;
}

class EngineTest : public ::testing::Test {
protected:
  void SetUp() override {
    const char *art = std::getenv("KILN_SERVE_ARTIFACT");
    if (!art || !*art)
      GTEST_SKIP() << "set KILN_SERVE_ARTIFACT to a compiled glm5-tiny-dev";
    path_ = art;
  }
  std::unique_ptr<Model> load(int threads) {
    auto m = Model::load(path_, threads);
    EXPECT_TRUE(m.isOk()) << m.status().toString();
    return m.isOk() ? std::move(m).value() : nullptr;
  }
  /// Greedy (or sampled) tokens of one request alone, on the sequential
  /// path; cached by prompt and settings.
  std::vector<int32_t> alone(const RequestParams &p,
                             std::vector<float> *logits = nullptr) {
    auto key = std::make_tuple(p.prompt, p.maxTokens, p.sampling.temperature,
                               p.sampling.seed, p.ignoreEos);
    auto it = alone_.find(key);
    if (it != alone_.end() && !logits)
      return it->second;
    if (!single_)
      single_ = load(2);
    engine::GenerateOptions g;
    g.maxNewTokens = p.maxTokens;
    g.sampling = p.sampling;
    g.ignoreEos = p.ignoreEos;
    g.keepPromptLogits = logits != nullptr;
    auto r = engine::generate(*single_, p.prompt, g);
    EXPECT_TRUE(r.isOk()) << r.status().toString();
    if (logits)
      *logits = r->promptLogits;
    return alone_[key] = r->tokens;
  }
  /// Submits all, runs to completion, returns outputs by submission order.
  std::vector<RequestOutput> runAll(Engine &e,
                                    const std::vector<RequestParams> &ps,
                                    bool checkEachStep = false) {
    std::vector<RequestId> ids;
    for (const RequestParams &p : ps) {
      auto id = e.submit(p);
      EXPECT_TRUE(id.isOk()) << id.status().toString();
      ids.push_back(*id);
    }
    while (e.hasWork()) {
      e.step();
      if (checkEachStep) {
        std::string bad = e.checkInvariants();
        EXPECT_EQ(bad, "");
        if (!bad.empty())
          break;
      }
    }
    std::map<RequestId, RequestOutput> byId;
    for (RequestOutput &o : e.takeFinished())
      byId[o.request] = std::move(o);
    std::vector<RequestOutput> out;
    for (RequestId id : ids)
      out.push_back(byId[id]);
    return out;
  }
  static RequestParams greedy(std::vector<int32_t> prompt, int64_t n) {
    RequestParams p;
    p.prompt = std::move(prompt);
    p.maxTokens = n;
    p.ignoreEos = true;
    return p;
  }
  /// N requests of mixed lengths: the golden prompts, prefixes of them and
  /// of the eval text, some sharing a prefix.
  static std::vector<RequestParams> mixed(size_t n) {
    const Golden &g = golden();
    std::vector<RequestParams> ps;
    for (size_t i = 0; i < n; ++i) {
      if (i < g.prompts.size()) {
        ps.push_back(greedy(g.prompts[i], 64));
        continue;
      }
      size_t len = 5 + (i * 97) % 300;
      std::vector<int32_t> prompt(g.eval.begin() + (i % 3) * 40,
                                  g.eval.begin() + (i % 3) * 40 + len);
      ps.push_back(greedy(prompt, 8 + int64_t(i * 13) % 40));
    }
    return ps;
  }
  static EngineOptions small(int64_t pages = 0) {
    EngineOptions o;
    o.kvMemoryBytes = pages ? pages : int64_t(256) << 20;
    return o;
  }
  std::string path_;
  std::unique_ptr<Model> single_;
  std::map<std::tuple<std::vector<int32_t>, int64_t, float, uint64_t, bool>,
           std::vector<int32_t>>
      alone_;
};

double relL2(const std::vector<float> &a, const std::vector<float> &b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += std::pow(double(a[i]) - b[i], 2);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST_F(EngineTest, BatchesMatchSingleRequests) {
  const Golden &g = golden();
  for (int threads : {1, 2})
    for (int spec : {0, 3})
      for (size_t n : {size_t(1), size_t(4), size_t(16)}) {
        SCOPED_TRACE("threads " + std::to_string(threads) + " spec " +
                     std::to_string(spec) + " batch " + std::to_string(n));
        auto model = load(threads);
        EngineOptions o = small();
        o.specK = spec;
        auto e = Engine::create(*model, o);
        ASSERT_TRUE(e.isOk()) << e.status().toString();
        std::vector<RequestParams> ps = mixed(n);
        std::vector<RequestOutput> out = runAll(**e, ps);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i].finish, FinishReason::Length) << out[i].error;
          EXPECT_EQ(out[i].ids, alone(ps[i])) << "request " << i;
          if (i < g.prompts.size())
            EXPECT_EQ(out[i].ids, g.greedy[i]) << "golden prompt " << i;
        }
        if (spec > 0)
          EXPECT_GT((*e)->metrics().specRounds, 0);
        EXPECT_EQ((*e)->metrics().pagesUsed, 0);
      }
}

TEST_F(EngineTest, ChunkedPrefillKeepsLogitsAndTokens) {
  const Golden &g = golden();
  RequestParams p = greedy(g.prompts[3], 16); // the longest golden prompt
  p.returnPromptLogits = true;
  std::vector<float> ref;
  std::vector<int32_t> tokens = alone(p, &ref);
  auto model = load(2);
  for (int64_t chunk : {int64_t(1), int64_t(7), int64_t(64), int64_t(100),
                        int64_t(p.prompt.size())}) {
    SCOPED_TRACE("chunk " + std::to_string(chunk));
    EngineOptions o = small();
    o.maxBatchedTokens = chunk;
    o.prefixCache = false;
    // Re-created per chunk size: the pool is set up once per engine.
    model = load(2);
    auto e = Engine::create(*model, o);
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    std::vector<RequestOutput> out = runAll(**e, {p});
    EXPECT_LE(relL2(out[0].promptLogits, ref), 1e-4);
    EXPECT_EQ(out[0].ids, tokens);
    EXPECT_GE((*e)->metrics().steps,
              (int64_t(p.prompt.size()) + chunk - 1) / chunk);
  }
}

TEST_F(EngineTest, SharedPrefixIsCachedAndChangesNothing) {
  const Golden &g = golden();
  std::vector<int32_t> shared(g.eval.begin(), g.eval.begin() + 1200);
  RequestParams first = greedy(shared, 4);
  first.prompt.insert(first.prompt.end(), g.eval.begin() + 3000,
                      g.eval.begin() + 3100);
  RequestParams second = greedy(shared, 24);
  second.prompt.insert(second.prompt.end(), g.eval.begin() + 5000,
                       g.eval.begin() + 5150);
  // With MTP the draft caches must be final too before a page is shared.
  for (int spec : {0, 3}) {
    SCOPED_TRACE("spec " + std::to_string(spec));
    auto model = load(2);
    EngineOptions o = small();
    o.specK = spec;
    auto e = Engine::create(*model, o);
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    runAll(**e, {first});
    int64_t computedBefore = (*e)->metrics().computedTokens;
    RequestOutput hit = runAll(**e, {second})[0];
    const int64_t aligned = 1200 / 64 * 64;
    EXPECT_GE(hit.cachedTokens, aligned);
    // Only the rest ran through the target plan (plus the generated tokens;
    // with MTP, the verify rows instead).
    if (spec == 0)
      EXPECT_EQ((*e)->metrics().computedTokens - computedBefore,
                int64_t(second.prompt.size()) - hit.cachedTokens + 24 - 1);
    else
      EXPECT_LT((*e)->metrics().computedTokens - computedBefore,
                int64_t(second.prompt.size()) - aligned + 24 * 4);
    (*e)->flushPrefixCache();
    EXPECT_EQ((*e)->metrics().pagesEvictable, 0);
    RequestOutput miss = runAll(**e, {second})[0];
    EXPECT_EQ(miss.cachedTokens, 0);
    EXPECT_EQ(hit.ids, miss.ids);
    EXPECT_EQ(hit.ids, alone(second));
    EXPECT_GE((*e)->metrics().prefixHitTokens, aligned);
  }
}

TEST_F(EngineTest, SecondWaveSharesTheFirstWavesPrefixUnderMtp) {
  const Golden &g = golden();
  std::vector<int32_t> shared(g.eval.begin(), g.eval.begin() + 512);
  std::vector<RequestParams> ps;
  for (int i = 0; i < 6; ++i) {
    RequestParams p = greedy(shared, 8);
    p.prompt.insert(p.prompt.end(), g.eval.begin() + 4000 + 64 * i,
                    g.eval.begin() + 4064 + 64 * i);
    ps.push_back(p);
  }
  auto model = load(2);
  EngineOptions o = small();
  o.specK = 3;
  o.maxBatchedTokens = 1200; // two requests' prompts per step
  auto e = Engine::create(*model, o);
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  std::vector<RequestOutput> out = runAll(**e, ps);
  // The first step computes requests 0-1 (and part of 2); from the next
  // admission on, the 512 shared tokens come from the cache.
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(out[i].ids, alone(ps[i])) << "request " << i;
    if (i >= 3)
      EXPECT_EQ(out[i].cachedTokens, 512) << "request " << i;
  }
}

TEST_F(EngineTest, OneDraftCallPerRoundBetweenPages) {
  // The draft rows a verify leaves behind wait for the next round's draft
  // call, except where they complete a page the prefix cache takes.
  const Golden &g = golden();
  RequestParams p = greedy(g.prompts[0], 150);
  for (bool prefix : {false, true}) {
    SCOPED_TRACE(prefix ? "prefix cache" : "no prefix cache");
    auto model = load(1);
    EngineOptions o = small();
    o.specK = 1;
    o.prefixCache = prefix;
    auto e = Engine::create(*model, o);
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    RequestOutput out = runAll(**e, {p})[0];
    EXPECT_EQ(out.ids, alone(p));
    const EngineMetrics &m = (*e)->metrics();
    ASSERT_GT(m.specRounds, 0);
    const int64_t pages =
        (int64_t(p.prompt.size()) + p.maxTokens) / kDefaultPageRows + 1;
    if (prefix)
      EXPECT_LE(m.specDraftCalls, m.specRounds + pages);
    else
      EXPECT_EQ(m.specDraftCalls, m.specRounds);
    EXPECT_GT(m.specDraftS, 0);
    EXPECT_GT(m.specVerifyS, 0);
  }
}

TEST_F(EngineTest, SmallPoolPreemptsAndLeaksNothing) {
  const Golden &g = golden();
  std::vector<RequestParams> ps;
  for (int i = 0; i < 6; ++i) {
    std::vector<int32_t> prompt(g.eval.begin() + i * 500,
                                g.eval.begin() + i * 500 + 150 + i * 20);
    ps.push_back(greedy(prompt, 60));
  }
  auto model = load(2);
  // One request needs at most ceil((250 + 60) / 16) = 20 pages: the pool
  // holds about 2.5 of them.
  EngineOptions o;
  o.pageRows = 16;
  auto probe = Engine::create(*model, small());
  ASSERT_TRUE(probe.isOk());
  o.kvMemoryBytes = 50 * 16 * (*probe)->layout().bytesPerToken;
  probe->reset();
  model = load(2);
  auto e = Engine::create(*model, o);
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EXPECT_EQ((*e)->layout().pages, 50);
  std::vector<RequestOutput> out = runAll(**e, ps, /*checkEachStep=*/true);
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(out[i].finish, FinishReason::Length) << out[i].error;
    EXPECT_EQ(out[i].ids, alone(ps[i])) << "request " << i;
  }
  EXPECT_GT((*e)->metrics().preemptions, 0);
  EXPECT_EQ((*e)->metrics().pagesUsed, 0);
  EXPECT_EQ((*e)->metrics().pagesFree + (*e)->metrics().pagesEvictable, 50);
  EXPECT_EQ((*e)->checkInvariants(), "");
}

TEST_F(EngineTest, RandomScheduleKeepsTheAccounts) {
  const Golden &g = golden();
  auto model = load(2);
  EngineOptions o;
  o.pageRows = 8;
  o.maxBatchedTokens = 48;
  auto probe = Engine::create(*model, small());
  ASSERT_TRUE(probe.isOk());
  o.kvMemoryBytes = 40 * 8 * (*probe)->layout().bytesPerToken;
  probe->reset();
  model = load(2);
  auto e = Engine::create(*model, o);
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  std::mt19937 rng(7);
  std::vector<RequestId> live;
  int64_t submitted = 0, cancelled = 0;
  for (int stepNo = 0; stepNo < 3000; ++stepNo) {
    if (rng() % 3 == 0) {
      // Prompts from a few shared starts, so prefixes hit and pages share.
      size_t start = (rng() % 4) * 16, len = 1 + rng() % 90;
      RequestParams p =
          greedy(std::vector<int32_t>(g.eval.begin() + start,
                                      g.eval.begin() + start + len),
                 1 + rng() % 30);
      auto id = (*e)->submit(p);
      ASSERT_TRUE(id.isOk()) << id.status().toString();
      live.push_back(*id);
      ++submitted;
    }
    if (!live.empty() && rng() % 11 == 0) {
      (*e)->cancel(live[rng() % live.size()]);
      ++cancelled;
    }
    if (rng() % 97 == 0)
      (*e)->flushPrefixCache();
    (*e)->step();
    std::string bad = (*e)->checkInvariants();
    ASSERT_EQ(bad, "") << "after step " << stepNo;
    const EngineMetrics &m = (*e)->metrics();
    ASSERT_EQ(m.pagesUsed + m.pagesFree + m.pagesEvictable, 40);
    for (RequestOutput &out : (*e)->takeFinished()) {
      ASSERT_NE(out.finish, FinishReason::Error) << out.error;
      live.erase(std::find(live.begin(), live.end(), out.request));
    }
  }
  (*e)->runToCompletion();
  EXPECT_EQ((*e)->checkInvariants(), "");
  EXPECT_EQ((*e)->metrics().pagesUsed, 0);
  EXPECT_GT((*e)->metrics().preemptions, 0);
  EXPECT_GT((*e)->metrics().prefixHitTokens, 0);
  EXPECT_GT(cancelled, 0);
  EXPECT_GT(submitted, 500);
}

TEST_F(EngineTest, RefusesWhatCanNeverRunAndServesTheRest) {
  const Golden &g = golden();
  auto model = load(2);
  EngineOptions o;
  o.pageRows = 16;
  o.kvMemoryBytes = int64_t(10) << 20;
  auto e = Engine::create(*model, o);
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  auto ok = (*e)->submit(greedy(g.prompts[0], 8));
  ASSERT_TRUE(ok.isOk());
  // Past the fixture's 2048 positions.
  auto tooLong = (*e)->submit(greedy(g.prompts[0], 2040));
  ASSERT_FALSE(tooLong.isOk());
  EXPECT_NE(tooLong.status().message().find("2062"), std::string::npos)
      << tooLong.status().message();
  EXPECT_NE(tooLong.status().message().find("2048"), std::string::npos);
  // Larger than the whole pool.
  const int64_t pages = (*e)->layout().pages;
  std::vector<int32_t> big(
      g.eval.begin(), g.eval.begin() + std::min<int64_t>(pages * 16, 2000));
  auto tooBig = (*e)->submit(greedy(big, 40));
  if (pages * 16 < 2000 - 40) {
    ASSERT_FALSE(tooBig.isOk());
    EXPECT_NE(tooBig.status().message().find(std::to_string(pages) + " pages"),
              std::string::npos)
        << tooBig.status().message();
  }
  EXPECT_FALSE((*e)->submit(greedy({}, 4)).isOk());
  EXPECT_FALSE((*e)->submit(greedy({1, 999999}, 4)).isOk());
  RequestParams manyTop = greedy(g.prompts[0], 4);
  manyTop.logprobs = 5000;
  auto tooManyTop = (*e)->submit(manyTop);
  ASSERT_FALSE(tooManyTop.isOk());
  EXPECT_NE(tooManyTop.status().message().find(
                "top logprobs 5000 exceed the vocabulary of 2048"),
            std::string::npos)
      << tooManyTop.status().message();
  (*e)->runToCompletion();
  bool found = false;
  for (RequestOutput &out : (*e)->takeFinished())
    if (out.request == *ok) {
      found = true;
      EXPECT_EQ(out.ids, alone(greedy(g.prompts[0], 8)));
    }
  EXPECT_TRUE(found);
  EXPECT_GE((*e)->metrics().requestsRefused, 3);
}

TEST_F(EngineTest, LogprobsAreTheModelsAndIndependentOfTheBatch) {
  // Greedy: each token is the most likely, so it heads its top list; the
  // values are a log-softmax (the top probabilities sum to at most 1); and
  // they do not change with batch composition (alone vs with 7 others).
  auto model = load(2);
  std::vector<std::vector<TokenLogprob>> alone;
  for (size_t batch : {size_t(1), size_t(8)}) {
    auto e = Engine::create(*model, small());
    ASSERT_TRUE(e.isOk()) << e.status().toString();
    std::vector<RequestParams> ps = mixed(batch);
    for (RequestParams &p : ps)
      p.logprobs = 5;
    std::vector<RequestOutput> out = runAll(**e, ps);
    for (size_t i = 0; i < std::min<size_t>(batch, 4); ++i) {
      const RequestOutput &o = out[i];
      ASSERT_EQ(o.logprobs.size(), o.ids.size());
      for (size_t t = 0; t < o.ids.size(); ++t) {
        const TokenLogprob &lp = o.logprobs[t];
        ASSERT_EQ(lp.top.size(), 5u);
        EXPECT_EQ(lp.top[0].first, o.ids[t]);
        EXPECT_EQ(lp.top[0].second, lp.logprob);
        EXPECT_LE(lp.logprob, 0.0f);
        double mass = 0;
        for (size_t k = 0; k < lp.top.size(); ++k) {
          mass += std::exp(double(lp.top[k].second));
          if (k > 0)
            EXPECT_GE(lp.top[k - 1].second, lp.top[k].second);
        }
        EXPECT_LE(mass, 1.0 + 1e-5);
      }
      if (batch == 1)
        alone.push_back(o.logprobs);
    }
    if (batch == 8)
      for (size_t t = 0; t < alone[0].size(); ++t) {
        EXPECT_EQ(out[0].logprobs[t].logprob, alone[0][t].logprob);
        EXPECT_EQ(out[0].logprobs[t].top, alone[0][t].top);
      }
  }
  // Without logprobs nothing is recorded.
  auto e = Engine::create(*model, small());
  ASSERT_TRUE(e.isOk());
  EXPECT_TRUE(runAll(**e, mixed(1))[0].logprobs.empty());
}

TEST_F(EngineTest, SamplingIsPerRequest) {
  const Golden &g = golden();
  RequestParams a = greedy(g.prompts[1], 24);
  a.sampling.temperature = 0.9f;
  a.sampling.topP = 0.95f;
  a.sampling.seed = 11;
  RequestParams b = a;
  b.prompt = g.prompts[2];
  b.sampling.seed = 12;
  RequestParams c = a;
  c.sampling.seed = 99;
  auto model = load(2);
  auto e = Engine::create(*model, small());
  ASSERT_TRUE(e.isOk());
  std::vector<int32_t> solo = runAll(**e, {a})[0].ids;
  std::vector<RequestOutput> together = runAll(**e, {b, a, c});
  EXPECT_EQ(together[1].ids, solo);
  EXPECT_EQ(solo, alone(a));        // same sampler, same draws as generate()
  EXPECT_NE(together[2].ids, solo); // another seed, another text
}

TEST_F(EngineTest, StopIdsStringsAndCancel) {
  const Golden &g = golden();
  auto model = load(2);
  auto e = Engine::create(*model, small());
  ASSERT_TRUE(e.isOk());
  std::vector<int32_t> ref = alone(greedy(g.prompts[0], 64));
  RequestParams byId = greedy(g.prompts[0], 64);
  byId.ignoreEos = false;
  byId.stopIds = {ref[5]};
  RequestParams byText = greedy(g.prompts[0], 64);
  auto text = model->tokenizer()->decode(
      std::vector<int32_t>(ref.begin(), ref.begin() + 12));
  ASSERT_TRUE(text.isOk());
  byText.stopStrings = {text->substr(text->size() - 3)};
  RequestParams cancelled = greedy(g.prompts[1], 64);
  auto idC = (*e)->submit(cancelled);
  ASSERT_TRUE(idC.isOk());
  std::vector<RequestOutput> out = runAll(**e, {byId, byText});
  size_t firstStop = std::find(ref.begin(), ref.end(), ref[5]) - ref.begin();
  EXPECT_EQ(out[0].finish, FinishReason::Stop);
  EXPECT_EQ(out[0].ids,
            std::vector<int32_t>(ref.begin(), ref.begin() + firstStop + 1));
  EXPECT_EQ(out[1].finish, FinishReason::Stop);
  EXPECT_LE(out[1].ids.size(), 12u);
  EXPECT_EQ(out[1].text.find(byText.stopStrings[0]), std::string::npos);
  // The first request ran to the end meanwhile; cancel one mid-flight.
  auto idD = (*e)->submit(greedy(g.prompts[2], 64));
  ASSERT_TRUE(idD.isOk());
  (*e)->step();
  (*e)->step();
  (*e)->cancel(*idD);
  (*e)->runToCompletion();
  for (RequestOutput &o : (*e)->takeFinished())
    if (o.request == *idD) {
      EXPECT_EQ(o.finish, FinishReason::Cancelled);
      EXPECT_LT(o.ids.size(), 64u);
    }
  EXPECT_EQ((*e)->metrics().pagesUsed, 0);
}

TEST_F(EngineTest, LoopServesConcurrentClients) {
  std::vector<RequestParams> ps = mixed(16);
  std::vector<std::vector<int32_t>> want;
  for (const RequestParams &p : ps)
    want.push_back(alone(p));
  auto model = load(2);
  auto e = Engine::create(*model, small());
  ASSERT_TRUE(e.isOk()) << e.status().toString();
  EngineLoop loop(std::move(e).value());
  // One client thread per request, as a server's connections would be.
  std::vector<std::thread> clients;
  std::vector<RequestOutput> outs(ps.size());
  std::vector<std::vector<int32_t>> streamed(ps.size());
  for (size_t i = 0; i < ps.size(); ++i)
    clients.emplace_back([&, i] {
      std::promise<RequestOutput> done;
      auto id = loop.submit(
          ps[i],
          [&](int32_t t, const TokenLogprob *) { streamed[i].push_back(t); },
          [&](const RequestOutput &o) { done.set_value(o); });
      ASSERT_TRUE(id.isOk()) << id.status().toString();
      outs[i] = done.get_future().get();
    });
  for (std::thread &t : clients)
    t.join();
  for (size_t i = 0; i < ps.size(); ++i) {
    EXPECT_EQ(outs[i].ids, want[i]) << "request " << i;
    EXPECT_EQ(streamed[i], outs[i].ids) << "request " << i;
  }

  // A client that goes away after 3 tokens: cancelled, its pages freed.
  std::promise<RequestOutput> done;
  std::atomic<int> seen{0};
  std::promise<void> third;
  auto id = loop.submit(
      greedy(golden().prompts[3], 200),
      [&](int32_t, const TokenLogprob *) {
        if (++seen == 3)
          third.set_value();
      },
      [&](const RequestOutput &o) { done.set_value(o); });
  ASSERT_TRUE(id.isOk());
  third.get_future().get();
  loop.cancel(*id);
  RequestOutput cancelled = done.get_future().get();
  EXPECT_EQ(cancelled.finish, FinishReason::Cancelled);
  EXPECT_LT(cancelled.ids.size(), 200u);
  for (int i = 0; i < 1000 && loop.metrics().running > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(loop.metrics().running, 0);
  EXPECT_EQ(loop.metrics().pagesUsed, 0);

  // Refusals come back to the caller at once; stop(drain) finishes the
  // running requests and refuses new ones.
  auto tooLong = loop.submit(greedy(golden().prompts[0], 4000), {}, {});
  EXPECT_FALSE(tooLong.isOk());
  std::promise<RequestOutput> last;
  ASSERT_TRUE(loop.submit(greedy(golden().prompts[0], 64), {},
                          [&](const RequestOutput &o) { last.set_value(o); })
                  .isOk());
  loop.stop(/*drain=*/true);
  RequestOutput drained = last.get_future().get();
  EXPECT_EQ(drained.finish, FinishReason::Length);
  EXPECT_EQ(drained.ids, golden().greedy[0]);
  auto late = loop.submit(greedy(golden().prompts[0], 4), {}, {});
  ASSERT_FALSE(late.isOk());
  EXPECT_EQ(late.status().code(), StatusCode::Unavailable);
  EXPECT_GE(loop.metrics().requestsRefused, 2);
}

} // namespace
} // namespace kiln::serve
