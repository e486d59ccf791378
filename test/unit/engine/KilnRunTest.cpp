//===- KilnRunTest.cpp - kiln-run's command line, output and exit codes ---===//

#include "runtime/support/Npy.h"
#include "test/unit/engine/TinyArtifact.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#ifndef KILN_RUN_BINARY
#error "KILN_RUN_BINARY must be defined"
#endif

namespace kiln::engine::test {
namespace {

struct Outcome {
  int rc = -1;
  std::string out, err;
};

std::string quote(const std::string &s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

class KilnRunTest : public ::testing::Test {
protected:
  void SetUp() override {
    model_ = tempPath("run.kiln");
    ASSERT_TRUE(writeTinyArtifact(model_, attentionModel()).isOk());
  }
  void TearDown() override {
    for (const std::string &p : {model_, outPath_, errPath_, extra_})
      std::remove(p.c_str());
  }

  Outcome run(const std::vector<std::string> &args) {
    std::string cmd = quote(KILN_RUN_BINARY);
    for (const std::string &a : args)
      cmd += " " + quote(a);
    cmd += " > " + quote(outPath_) + " 2> " + quote(errPath_);
    int status = std::system(cmd.c_str());
    Outcome r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(outPath_);
    r.err = slurp(errPath_);
    return r;
  }

  std::string model_;
  std::string outPath_ = tempPath("out.txt"), errPath_ = tempPath("err.txt");
  std::string extra_ = tempPath("extra");
};

TEST_F(KilnRunTest, UsageErrorsExit2) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  } cases[] = {
      {{model_, "-p", "a", "--bogus"}, "unknown option '--bogus'"},
      {{model_, "-p", "a", "-n", "abc"}, "-n: 'abc' is not an integer"},
      {{model_, "-p", "a", "-n", "-1"}, "-n: -1 is out of range"},
      {{model_, "-p", "a", "--top-p", "2"}, "--top-p: expected a value in"},
      {{model_, "-p", "a", "--temp", "nan"}, "not a finite number"},
      {{model_, "-p", "a", "--output-format=xml"}, "'xml', expected text"},
      {{model_, "-p", "a", "--spec", "99"}, "--spec: 99 is out of range"},
      {{model_}, "no prompt"},
      {{model_, "-p", "a", "--prompt-ids", "1"}, "only one of"},
      {{model_, "-p", "a", "-n"}, "-n needs a value"},
      {{"-p", "a"}, "no model given"},
      {{model_, "-p", "a", "--system", "s"}, "need --chat"},
  };
  for (const Case &c : cases) {
    Outcome r = run(c.args);
    EXPECT_EQ(r.rc, 2) << c.message << "\n" << r.err;
    EXPECT_EQ(r.err.rfind("kiln-run: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos)
        << "'" << c.message << "' not in: " << r.err;
  }
  EXPECT_EQ(run({model_, "-p", "a", "--spec", "0", "-n", "1"}).rc, 0);
}

TEST_F(KilnRunTest, LoadAndRunErrorsExit1) {
  Outcome r = run({"/nonexistent.kiln", "-p", "a"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.err.rfind("kiln-run: /nonexistent.kiln", 0), 0u) << r.err;

  r = run({model_, "-p", "abab", "--max-prompt-tokens", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("more than --max-prompt-tokens 1"), std::string::npos)
      << r.err;

  r = run({model_, "-p", "a", "-n", "100"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("-n 100 = 101 exceeds the model's "
                       "max_position_embeddings 64"),
            std::string::npos)
      << r.err;

  r = run({model_, "--prompt-ids", "1,99", "-n", "1"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("prompt token 1 is 99"), std::string::npos) << r.err;
}

TEST_F(KilnRunTest, JsonGeneration) {
  Outcome r =
      run({model_, "-p", "ab a", "-n", "5", "--ignore-eos",
           "--output-format=json", "--threads", "1", "--dump-logits", extra_});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_ids"], (std::vector<int32_t>{3, 4, 0}));
  EXPECT_EQ(j["ids"].size(), 5u);
  EXPECT_TRUE(j["text"].is_string());
  for (const char *k : {"ttft_s", "prefill_tok_s", "decode_tok_s",
                        "prompt_tokens", "generated_tokens", "threads"})
    EXPECT_TRUE(j["stats"].contains(k)) << k;
  EXPECT_EQ(j["stats"]["threads"], 1);
  EXPECT_EQ(j["stats"]["generated_tokens"], 5);
  auto logits = readNpy(extra_);
  ASSERT_TRUE(logits.isOk()) << logits.status().toString();
  EXPECT_EQ(logits->dtype, NpyDType::F32);
  EXPECT_EQ(logits->shape, (std::vector<int64_t>{16}));

  // The same ids through --prompt-ids give the same tokens.
  Outcome ids = run({model_, "--prompt-ids", "3,4,0", "-n", "5", "--ignore-eos",
                     "--output-format", "json"});
  ASSERT_EQ(ids.rc, 0) << ids.err;
  EXPECT_EQ(nlohmann::json::parse(ids.out)["ids"], j["ids"]);
}

TEST_F(KilnRunTest, ChatLayout) {
  Outcome r = run({model_, "-p", "a", "--chat", "--no-think", "-n", "0",
                   "--output-format=json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  // [gMASK] <sop> <|user|> \n a <|assistant|> \n <think> </think>
  EXPECT_EQ(nlohmann::json::parse(r.out)["prompt_ids"],
            (std::vector<int32_t>{7, 8, 10, 6, 0, 11, 6, 13, 14}));
}

TEST_F(KilnRunTest, TextModeStreamsAndReportsSpeed) {
  Outcome r = run({model_, "-p", "ab", "-n", "4", "--ignore-eos"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(r.out.empty());
  EXPECT_NE(r.err.find("time to first token"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("prefill"), std::string::npos);
  EXPECT_NE(r.err.find("decode"), std::string::npos);
}

TEST_F(KilnRunTest, Perplexity) {
  {
    std::ofstream f(extra_);
    f << "ab a ab ab a a b c ab a b a";
  }
  Outcome r = run(
      {model_, "--perplexity", extra_, "--ctx", "4", "--output-format=json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["ppl"].get<double>(), 1.0);
  EXPECT_GE(j["windows"].get<int>(), 2);
  EXPECT_EQ(j["tokens"].get<int>(), j["windows"].get<int>() * 3);

  Outcome big = run({model_, "--perplexity", extra_, "--ctx", "100"});
  EXPECT_EQ(big.rc, 1);
  EXPECT_NE(big.err.find("--ctx 100 exceeds"), std::string::npos) << big.err;
}

} // namespace
} // namespace kiln::engine::test
