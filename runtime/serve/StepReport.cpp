//===- StepReport.cpp -----------------------------------------------------===//

#include "runtime/serve/StepReport.h"
#include "runtime/serve/WireWords.h"

using namespace kiln;
using namespace kiln::serve;

namespace {

using wire::Reader;
using wire::Writer;

void writeLogprob(Writer &w, const TokenLogprob &lp) {
  w.real(lp.logprob);
  w.word(int64_t(lp.top.size()));
  for (const auto &[id, value] : lp.top) {
    w.word(id);
    w.real(value);
  }
}

TokenLogprob readLogprob(Reader &r) {
  TokenLogprob lp;
  lp.logprob = r.real("logprob");
  lp.top.resize(r.count("top logprobs"));
  for (auto &[id, value] : lp.top) {
    id = int32_t(r.word("top logprob id"));
    value = r.real("top logprob");
  }
  return lp;
}

void writeOutput(Writer &w, const RequestOutput &o) {
  w.word(o.request);
  w.text(o.id);
  w.list(o.prompt);
  w.list(o.ids);
  w.text(o.text);
  w.word(int64_t(o.finish));
  w.text(o.error);
  w.word(o.cachedTokens);
  w.word(o.preemptions);
  w.real64(o.queueS);
  w.real64(o.ttftS);
  w.real64(o.e2eS);
  w.word(int64_t(o.interTokenS.size()));
  for (double s : o.interTokenS)
    w.real64(s);
  w.list(o.specReached);
  w.list(o.specAccepted);
  w.word(int64_t(o.promptLogits.size()));
  for (float f : o.promptLogits)
    w.real(f);
  w.word(int64_t(o.logprobs.size()));
  for (const TokenLogprob &lp : o.logprobs)
    writeLogprob(w, lp);
}

RequestOutput readOutput(Reader &r) {
  RequestOutput o;
  o.request = r.word("loop id");
  o.id = r.text("request id");
  o.prompt = r.list<int32_t>("prompt");
  o.ids = r.list<int32_t>("generated ids");
  o.text = r.text("text");
  int64_t finish = r.word("finish reason");
  o.finish = finish >= 0 && finish <= int64_t(FinishReason::Error)
                 ? FinishReason(finish)
                 : FinishReason::Error;
  o.error = r.text("error");
  o.cachedTokens = r.word("cached tokens");
  o.preemptions = r.word("preemptions");
  o.queueS = r.real64("queue time");
  o.ttftS = r.real64("time to first token");
  o.e2eS = r.real64("end-to-end time");
  o.interTokenS.resize(r.count("inter-token times"));
  for (double &s : o.interTokenS)
    s = r.real64("inter-token time");
  o.specReached = r.list<int64_t>("spec reached");
  o.specAccepted = r.list<int64_t>("spec accepted");
  o.promptLogits.resize(r.count("prompt logits"));
  for (float &f : o.promptLogits)
    f = r.real("prompt logit");
  o.logprobs.resize(r.count("logprobs"));
  for (TokenLogprob &lp : o.logprobs)
    lp = readLogprob(r);
  return o;
}

/// Every int64 field of EngineMetrics but steps, in one order for the
/// wire and for addMetrics.
template <typename M, typename F> void eachCount(M &m, F f) {
  for (auto *field :
       {&m.running, &m.waiting, &m.pagesTotal, &m.pagesUsed, &m.pagesEvictable,
        &m.pagesFree, &m.requestsSubmitted, &m.requestsRefused,
        &m.requestsFinished, &m.promptTokens, &m.generatedTokens,
        &m.computedTokens, &m.prefixQueriedTokens, &m.prefixHitTokens,
        &m.evictedPages, &m.preemptions, &m.specRounds, &m.specDrafted,
        &m.specAccepted})
    f(*field);
}

} // namespace

void kiln::serve::addMetrics(EngineMetrics &into, const EngineMetrics &from) {
  std::vector<int64_t> values;
  eachCount(from, [&](const int64_t &v) { values.push_back(v); });
  size_t i = 0;
  eachCount(into, [&](int64_t &v) { v += values[i++]; });
  for (auto [to, add] :
       {std::pair{&into.specReachedAt, &from.specReachedAt},
        std::pair{&into.specAcceptedAt, &from.specAcceptedAt}}) {
    if (to->size() < add->size())
      to->resize(add->size(), 0);
    for (size_t k = 0; k < add->size(); ++k)
      (*to)[k] += (*add)[k];
  }
}

std::vector<int64_t> kiln::serve::encodeStepReport(const StepReport &report) {
  Writer w;
  w.word(int64_t(report.tokens.size()));
  for (const StepReport::Token &t : report.tokens) {
    w.word(t.loop);
    w.word(t.token);
    w.flag(t.hasLogprob);
    if (t.hasLogprob)
      writeLogprob(w, t.logprob);
  }
  w.word(int64_t(report.finished.size()));
  for (const RequestOutput &o : report.finished)
    writeOutput(w, o);
  w.flag(report.hasWork);
  eachCount(report.metrics, [&](const int64_t &v) { w.word(v); });
  w.list(report.metrics.specReachedAt);
  w.list(report.metrics.specAcceptedAt);
  return std::move(w.words);
}

Result<StepReport>
kiln::serve::decodeStepReport(const std::vector<int64_t> &words) {
  Reader r(words);
  StepReport report;
  report.tokens.resize(r.count("tokens"));
  for (StepReport::Token &t : report.tokens) {
    t.loop = r.word("token loop id");
    t.token = int32_t(r.word("token"));
    t.hasLogprob = r.flag("logprob flag");
    if (t.hasLogprob)
      t.logprob = readLogprob(r);
  }
  report.finished.resize(r.count("finished requests"));
  for (RequestOutput &o : report.finished)
    o = readOutput(r);
  report.hasWork = r.flag("work flag");
  eachCount(report.metrics, [&](int64_t &v) { v = r.word("metrics"); });
  report.metrics.specReachedAt = r.list<int64_t>("spec reached at");
  report.metrics.specAcceptedAt = r.list<int64_t>("spec accepted at");
  KILN_RETURN_IF_ERROR(r.finish("step report"));
  return report;
}
