//===- StepEvents.cpp -----------------------------------------------------===//

#include "runtime/serve/StepEvents.h"
#include "runtime/serve/WireWords.h"

#include <string>

using namespace kiln;
using namespace kiln::serve;

namespace {

using wire::Reader;
using wire::Writer;

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
  w.list(e.placedOn);
  w.list(e.loopIds);
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
  e.placedOn = r.list<int32_t>("request ranks");
  e.loopIds = r.list<RequestId>("loop ids");
  e.flushPrefixCache = r.flag("flush flag");
  e.step = r.flag("step flag");
  e.stop = r.flag("stop flag");
  KILN_RETURN_IF_ERROR(r.finish("step events"));
  return e;
}
