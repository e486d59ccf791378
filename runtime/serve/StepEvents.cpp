//===- StepEvents.cpp -----------------------------------------------------===//

#include "runtime/serve/StepEvents.h"

#include <cstring>
#include <string>

using namespace kiln;
using namespace kiln::serve;

namespace {

class Writer {
public:
  void word(int64_t w) { words.push_back(w); }
  void flag(bool b) { word(b ? 1 : 0); }
  void real(float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    word(int64_t(bits));
  }
  void text(const std::string &s) {
    word(int64_t(s.size()));
    for (size_t i = 0; i < s.size(); i += 8) {
      int64_t w = 0;
      std::memcpy(&w, s.data() + i, std::min<size_t>(8, s.size() - i));
      word(w);
    }
  }
  template <typename T> void list(const std::vector<T> &v) {
    word(int64_t(v.size()));
    for (const T &x : v)
      word(int64_t(x));
  }

  std::vector<int64_t> words;
};

class Reader {
public:
  explicit Reader(const std::vector<int64_t> &words) : words_(words) {}

  bool ok() const { return error_.empty(); }
  const std::string &error() const { return error_; }
  bool atEnd() const { return pos_ == words_.size(); }

  int64_t word(const char *what) {
    if (pos_ >= words_.size()) {
      fail(std::string("cut short at ") + what);
      return 0;
    }
    return words_[pos_++];
  }
  /// A count of at most the words left (each element takes one or more).
  size_t count(const char *what) {
    int64_t n = word(what);
    if (n < 0 || uint64_t(n) > words_.size() - pos_) {
      fail(std::string("count ") + std::to_string(n) + " of " + what +
           " is out of range");
      return 0;
    }
    return size_t(n);
  }
  bool flag(const char *what) { return word(what) != 0; }
  float real(const char *what) {
    uint32_t bits = uint32_t(word(what));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  std::string text(const char *what) {
    int64_t n = word(what);
    if (n < 0 || uint64_t(n) > 8 * (words_.size() - pos_)) {
      fail(std::string("length ") + std::to_string(n) + " of " + what +
           " is out of range");
      return {};
    }
    std::string s(size_t(n), '\0');
    for (size_t i = 0; i < s.size(); i += 8) {
      int64_t w = word(what);
      std::memcpy(s.data() + i, &w, std::min<size_t>(8, s.size() - i));
    }
    return s;
  }
  template <typename T> std::vector<T> list(const char *what) {
    std::vector<T> v(count(what));
    for (T &x : v)
      x = T(word(what));
    return v;
  }

private:
  void fail(std::string message) {
    if (error_.empty())
      error_ = std::move(message);
    pos_ = words_.size();
  }

  const std::vector<int64_t> &words_;
  size_t pos_ = 0;
  std::string error_;
};

// One request's fields, in one order for both directions.
void writeParams(Writer &w, const RequestParams &p) {
  w.text(p.id);
  w.list(p.prompt);
  w.word(p.maxTokens);
  w.real(p.sampling.temperature);
  w.word(p.sampling.topK);
  w.real(p.sampling.topP);
  w.word(int64_t(p.sampling.seed));
  w.list(p.stopIds);
  w.flag(p.ignoreEos);
  w.word(int64_t(p.stopStrings.size()));
  for (const std::string &s : p.stopStrings)
    w.text(s);
  w.flag(p.returnPromptLogits);
  w.word(p.logprobs);
}

RequestParams readParams(Reader &r) {
  RequestParams p;
  p.id = r.text("request id");
  p.prompt = r.list<int32_t>("prompt");
  p.maxTokens = r.word("max tokens");
  p.sampling.temperature = r.real("temperature");
  p.sampling.topK = r.word("top-k");
  p.sampling.topP = r.real("top-p");
  p.sampling.seed = uint64_t(r.word("seed"));
  p.stopIds = r.list<int32_t>("stop ids");
  p.ignoreEos = r.flag("ignore eos");
  p.stopStrings.resize(r.count("stop strings"));
  for (std::string &s : p.stopStrings)
    s = r.text("stop string");
  p.returnPromptLogits = r.flag("prompt logits");
  p.logprobs = int32_t(r.word("logprobs"));
  return p;
}

} // namespace

std::vector<int64_t> kiln::serve::encodeStepEvents(const StepEvents &e) {
  Writer w;
  w.word(int64_t(e.submitted.size()));
  for (const RequestParams &p : e.submitted)
    writeParams(w, p);
  w.list(e.cancelled);
  w.flag(e.flushPrefixCache);
  w.flag(e.step);
  w.flag(e.stop);
  return std::move(w.words);
}

Result<StepEvents>
kiln::serve::decodeStepEvents(const std::vector<int64_t> &words) {
  Reader r(words);
  StepEvents e;
  e.submitted.resize(r.count("submitted requests"));
  for (RequestParams &p : e.submitted)
    p = readParams(r);
  e.cancelled = r.list<RequestId>("cancelled ids");
  e.flushPrefixCache = r.flag("flush flag");
  e.step = r.flag("step flag");
  e.stop = r.flag("stop flag");
  if (r.ok() && !r.atEnd())
    return makeError(StatusCode::DataLoss, "step events: ", words.size(),
                     " words, more than the events use");
  if (!r.ok())
    return makeError(StatusCode::DataLoss, "step events: ", r.error());
  return e;
}
