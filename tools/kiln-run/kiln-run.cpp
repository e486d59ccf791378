//===- kiln-run.cpp - Run a Kiln artifact: generate or score text ---------===//
//
//   kiln-run model.kiln -p "def main():" -n 64
//   kiln-run model.kiln --prompt-file chat.txt --chat --temp 0.7 --top-p 0.95
//   kiln-run model.kiln --perplexity eval.txt --ctx 256 --output-format=json
//   kiln-run model.kiln --batch-file requests.jsonl -o results.jsonl
//
// Text mode streams the generated text to stdout and prints time to first
// token, prefill and decode speeds to stderr. JSON mode prints one object.
// Usage errors exit 2; load and run errors print `kiln-run: <message>` and
// exit 1.
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/ArtifactFormat.h"
#include "runtime/comm/CommFactory.h"
#include "runtime/cpu/CpuFeatures.h"
#include "runtime/engine/Generator.h"
#include "runtime/engine/Model.h"
#include "runtime/engine/SpecDecoder.h"
#include "runtime/hip/HipPlanDevice.h"
#include "runtime/serve/GenerateOne.h"
#include "runtime/support/Npy.h"
#include "tools/common/ArgParse.h"
#include "tools/common/RankArtifact.h"
#include "tools/kiln-run/BatchFile.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::engine;

namespace {

constexpr int64_t kMaxNewTokens = int64_t(1) << 20;
constexpr int64_t kDefaultMaxPromptTokens = 32768;
constexpr int64_t kMaxThreads = 1024;

const char *kUsage =
    R"(usage: kiln-run MODEL.kiln (-p TEXT | --prompt-file FILE | --prompt-ids IDS) [options]
       kiln-run MODEL.kiln --perplexity FILE [--ctx N] [options]
       kiln-run MODEL.kiln --batch-file FILE [-o FILE] [options]

Generation:
  -p, --prompt TEXT         the prompt
  --prompt-file FILE        read the prompt from FILE
  --prompt-ids IDS          the prompt as comma-separated token ids
  -n N                      tokens to generate (default 128)
  --chat                    lay the prompt out as a GLM chat user turn plus
                            the generation prompt
  --system TEXT             with --chat: a system turn before the user turn
  --no-think                with --chat: disable thinking (<think></think>)
  --temp T                  sampling temperature (default 0: greedy)
  --top-k K                 keep the K most likely tokens (default 0: off)
  --top-p P                 nucleus sampling mass (default 1: off)
  --seed S                  sampler seed (default 0)
  --ignore-eos              keep generating through stop tokens
  --max-prompt-tokens N     reject longer prompts (default 32768)
  --prefill-chunk N         prompt tokens per prefill run (default 512)
  --dump-logits PATH.npy    write the float32 logits [V] of the last prompt
                            position
  --spec K                  speculative decoding with the MTP head: K
                            drafts per round (default: off on the CPU,
                            where it does not pay; the artifact's with
                            --device hip; 0: off)
Offline batch:
  --batch-file FILE         one JSON request per line: prompt or prompt_ids,
                            id, max_tokens, temperature, top_p, top_k, seed,
                            stop, stop_token_ids, ignore_eos (the generation
                            options above are the defaults); all run
                            concurrently
  -o, --output FILE         results, one JSON line per request in input
                            order (default: stdout)
Serving engine (generation on the CPU, and --batch-file on either device):
  --kv-memory BYTES         KV page pool size (suffix K, M, G; default: the
                            one sequence's pages, or with --batch-file a
                            quarter of the available memory)
  --kv-fraction F           without --kv-memory: this fraction of the
                            available memory (default 0.25 of the host's,
                            0.9 of the GPU's free; --batch-file)
  --page-size N             tokens per KV page (default 64)
  --max-batched-tokens N    target rows per step (default 2048; a single
                            generation uses --prefill-chunk)
  --max-running N           requests running at once (default 256)
  --no-prefix-cache         do not share cached prompt prefixes
Perplexity:
  --perplexity FILE         score FILE in non-overlapping windows (text, or
                            token ids in a 1-D int32/int64 .npy)
  --ctx N                   tokens per window (default 256)
Common:
  --device DEV              cpu (default) or hip: run the plans on an AMD GPU
                            through the HIP runtime (libamdhip64, found on
                            the loader path or at $KILN_HIP_LIBRARY); the
                            artifact needs a GPU target (kiln-compile
                            --target=cpu,gfx950,gfx942)
  --gpu-slots N             hip: sequences the GPU caches hold (default 4;
                            --batch-file: --max-running)
  --gpu-ctx N               hip: positions per sequence in the GPU caches
                            (default: the model's, at most 8192)
  --gpu-target CHIP         hip: use the artifact's code object for CHIP
                            (gfx950, gfx942; default: the first the GPU
                            loads)
  --threads N               kernel threads (default: the CPUs this process
                            may run on)
  --cpu-affinity            pin each kernel thread to one CPU
  --cpu-path PATH           kernel path: best (default), avx512, avx2 or scalar;
                            also $KILN_CPU_PATH
  --mxfp4-activations f32|int8
                            MXFP4 matmuls: exact FP32 activations (default)
                            or int8 per 32-value block (docs/cpu.md); also
                            $KILN_MXFP4_ACTIVATIONS
  --bf16-activations f32|bf16
                            BF16 matmuls: exact FP32 activations (default)
                            or rounded to BF16 for the dot-product units
                            (docs/cpu.md); also $KILN_BF16_ACTIVATIONS
  --output-format FORMAT    text (default) or json (ids, text, stop and
                            stats; text null and text_error set when the
                            tokenizer has no token for an id)
  --no-verify               skip the segment checksums at load
  --version                 the version, this CPU's features and the kernel
                            path the kernels take
  -h, --help                this help
)";

struct Options {
  std::string model;
  std::string prompt;
  bool hasPrompt = false;
  std::string promptFile;
  std::string promptIds;
  int64_t n = 128;
  bool chat = false;
  std::string system;
  bool noThink = false;
  SamplingParams sampling;
  int64_t threads = 0;
  bool pinThreads = false;
  bool json = false;
  std::string dumpLogits;
  std::string perplexityFile;
  int64_t ctx = 256;
  bool ignoreEos = false;
  int64_t maxPromptTokens = kDefaultMaxPromptTokens;
  int64_t prefillChunk = kDefaultPrefillChunk;
  int64_t spec = -1; // -1: serve::specDrafts' default
  bool verify = true;
  std::string device = "cpu";
  int64_t gpuSlots = 4;
  bool gpuSlotsSet = false;
  int64_t gpuCtx = 0;
  std::string gpuTarget;
  std::string batchFile;
  std::string output;
  serve::EngineOptions engine;
};

using tools::UsageError;

int64_t parseInt(const std::string &flag, const std::string &value, int64_t lo,
                 int64_t hi) {
  return tools::intFlag(flag, value, lo, hi);
}

uint64_t parseSeed(const std::string &flag, const std::string &value) {
  uint64_t v = 0;
  const char *end = value.data() + value.size();
  auto [ptr, ec] = std::from_chars(value.data(), end, v);
  if (value.empty() || ec != std::errc() || ptr != end)
    throw UsageError{flag + ": '" + value + "' is not a non-negative integer"};
  return v;
}

float parseFloat(const std::string &flag, const std::string &value) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || end != value.c_str() + value.size() || errno != 0 ||
      !std::isfinite(v))
    throw UsageError{flag + ": '" + value + "' is not a finite number"};
  return float(v);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    bool hasInline = false;
    if (arg.rfind("--", 0) == 0) {
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg = arg.substr(0, eq);
        hasInline = true;
      }
    }
    auto next = [&]() -> std::string {
      if (hasInline)
        return value;
      if (i + 1 >= args.size())
        throw UsageError{arg + " needs a value"};
      return args[++i];
    };
    auto flag = [&]() {
      if (hasInline)
        throw UsageError{arg + " takes no value"};
    };
    if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--version") {
      std::cout << "kiln-run (Kiln), artifact format "
                << artifact::FORMAT_VERSION << "\n"
                << cpu::cpuSummary() << "\n";
      std::exit(0);
    } else if (arg == "--cpu-path") {
      std::string error;
      if (!cpu::setCpuPath(next(), &error))
        throw UsageError{"--cpu-path: " + error};
    } else if (arg == "--mxfp4-activations") {
      std::string error;
      if (!cpu::setMxfp4Activations(next(), &error))
        throw UsageError{"--mxfp4-activations: " + error};
    } else if (arg == "--bf16-activations") {
      std::string error;
      if (!cpu::setBf16Activations(next(), &error))
        throw UsageError{"--bf16-activations: " + error};
    } else if (arg == "-p" || arg == "--prompt") {
      o.prompt = next();
      o.hasPrompt = true;
    } else if (arg == "--prompt-file") {
      o.promptFile = next();
    } else if (arg == "--prompt-ids") {
      o.promptIds = next();
    } else if (arg == "-n" || arg == "--n-predict") {
      o.n = parseInt(arg, next(), 0, kMaxNewTokens);
    } else if (arg == "--chat") {
      flag();
      o.chat = true;
    } else if (arg == "--system") {
      o.system = next();
    } else if (arg == "--no-think") {
      flag();
      o.noThink = true;
    } else if (arg == "--temp" || arg == "--temperature") {
      o.sampling.temperature = parseFloat(arg, next());
      if (o.sampling.temperature < 0)
        throw UsageError{arg + ": " + std::to_string(o.sampling.temperature) +
                         " is negative, expected >= 0 (0 = greedy)"};
    } else if (arg == "--top-k") {
      o.sampling.topK = parseInt(arg, next(), 0, int64_t(1) << 31);
    } else if (arg == "--top-p") {
      o.sampling.topP = parseFloat(arg, next());
      if (!(o.sampling.topP > 0 && o.sampling.topP <= 1))
        throw UsageError{arg + ": expected a value in (0, 1]"};
    } else if (arg == "--seed") {
      o.sampling.seed = parseSeed(arg, next());
    } else if (arg == "--threads" || arg == "-t") {
      o.threads = parseInt(arg, next(), 0, kMaxThreads);
    } else if (arg == "--cpu-affinity") {
      o.pinThreads = true;
    } else if (arg == "--device") {
      o.device = next();
      if (o.device != "cpu" && o.device != "hip")
        throw UsageError{"--device: '" + o.device + "', expected cpu or hip"};
    } else if (arg == "--gpu-slots") {
      o.gpuSlots = parseInt(arg, next(), 1, 4096);
      o.gpuSlotsSet = true;
    } else if (arg == "--gpu-target") {
      o.gpuTarget = next();
    } else if (arg == "--gpu-ctx") {
      o.gpuCtx = parseInt(arg, next(), 1, int64_t(1) << 24);
    } else if (arg == "--output-format") {
      std::string f = next();
      if (f != "text" && f != "json")
        throw UsageError{"--output-format: '" + f + "', expected text or json"};
      o.json = f == "json";
    } else if (arg == "--dump-logits") {
      o.dumpLogits = next();
    } else if (arg == "--perplexity") {
      o.perplexityFile = next();
    } else if (arg == "--ctx") {
      o.ctx = parseInt(arg, next(), 2, int64_t(1) << 24);
    } else if (arg == "--ignore-eos") {
      flag();
      o.ignoreEos = true;
    } else if (arg == "--max-prompt-tokens") {
      o.maxPromptTokens = parseInt(arg, next(), 1, int64_t(1) << 24);
    } else if (arg == "--prefill-chunk") {
      o.prefillChunk = parseInt(arg, next(), 1, int64_t(1) << 16);
    } else if (arg == "--spec") {
      o.spec = parseInt(arg, next(), 0, 16);
    } else if (arg == "--batch-file") {
      o.batchFile = next();
    } else if (arg == "-o" || arg == "--output") {
      o.output = next();
    } else if (arg == "--kv-memory") {
      o.engine.kvMemoryBytes = tools::bytesFlag(arg, next());
    } else if (arg == "--kv-fraction") {
      o.engine.kvMemoryFraction = parseFloat(arg, next());
      if (!(o.engine.kvMemoryFraction > 0 && o.engine.kvMemoryFraction <= 1))
        throw UsageError{"--kv-fraction: expected a fraction in (0, 1]"};
    } else if (arg == "--page-size") {
      o.engine.pageRows = parseInt(arg, next(), 1, 65536);
    } else if (arg == "--max-batched-tokens") {
      o.engine.maxBatchedTokens = parseInt(arg, next(), 1, 1 << 20);
    } else if (arg == "--max-running") {
      o.engine.maxRunning = parseInt(arg, next(), 1, 1 << 20);
    } else if (arg == "--no-prefix-cache") {
      flag();
      o.engine.prefixCache = false;
    } else if (arg == "--no-verify") {
      flag();
      o.verify = false;
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      throw UsageError{"unknown option '" + arg + "' (see --help)"};
    } else if (o.model.empty()) {
      o.model = arg;
    } else {
      throw UsageError{"unexpected argument '" + arg +
                       "' (the model is already '" + o.model + "')"};
    }
  }
  if (o.model.empty())
    throw UsageError{"no model given"};
  int sources =
      int(o.hasPrompt) + int(!o.promptFile.empty()) + int(!o.promptIds.empty());
  bool ppl = !o.perplexityFile.empty();
  bool batch = !o.batchFile.empty();
  if (batch && (sources > 0 || ppl))
    throw UsageError{"--batch-file holds the prompts: it takes no other "
                     "prompt or --perplexity"};
  if (!batch && !o.output.empty())
    throw UsageError{"-o writes --batch-file results"};
  if (batch)
    return o;
  if (ppl && sources > 0)
    throw UsageError{"--perplexity scores a file: it takes no prompt"};
  if (!ppl && sources != 1)
    throw UsageError{sources == 0 ? "no prompt: give -p, --prompt-file or "
                                    "--prompt-ids (or --perplexity)"
                                  : "give only one of -p, --prompt-file and "
                                    "--prompt-ids"};
  if (o.chat && !o.promptIds.empty())
    throw UsageError{"--chat lays out text: it cannot wrap --prompt-ids"};
  if (!o.chat && (!o.system.empty() || o.noThink))
    throw UsageError{"--system and --no-think need --chat"};
  return o;
}

struct RunError {
  std::string message;
};

[[noreturn]] void fail(const Status &s) { throw RunError{s.message()}; }

void orFail(const Status &s) {
  if (!s.isOk())
    fail(s);
}

template <typename T> T orFail(Result<T> r) {
  if (!r.isOk())
    fail(r.status());
  return std::move(r).value();
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw RunError{path + ": cannot open the file"};
  std::ostringstream os;
  os << in.rdbuf();
  if (in.bad())
    throw RunError{path + ": read error"};
  return os.str();
}

std::vector<int32_t> parseIds(const std::string &text) {
  std::vector<int32_t> ids;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    size_t b = item.find_first_not_of(" \t\n");
    size_t e = item.find_last_not_of(" \t\n");
    if (b == std::string::npos)
      throw UsageError{"--prompt-ids: empty entry in '" + text + "'"};
    ids.push_back(int32_t(
        parseInt("--prompt-ids", item.substr(b, e - b + 1), 0, INT32_MAX)));
  }
  return ids;
}

const Tokenizer &needTokenizer(const Model &model) {
  if (!model.tokenizer())
    throw RunError{model.artifact().path() +
                   ": the artifact has no tokenizer (use --prompt-ids)"};
  return *model.tokenizer();
}

std::string jsonDump(const nlohmann::json &j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

int runPerplexity(Model &model, const Options &o) {
  std::vector<int32_t> ids;
  const std::string &file = o.perplexityFile;
  if (file.size() > 4 && file.compare(file.size() - 4, 4, ".npy") == 0) {
    // Token ids already encoded: a 1-D int32 (or int64) array.
    NpyArray a = orFail(readNpy(file));
    if (a.shape.size() != 1)
      throw RunError{file + ": expected a 1-D array of token ids"};
    if (a.dtype == NpyDType::I32) {
      ids = orFail(a.toVector<int32_t>());
    } else if (a.dtype == NpyDType::I64) {
      for (int64_t v : orFail(a.toVector<int64_t>())) {
        if (v < 0 || v > INT32_MAX)
          throw RunError{file + ": token id " + std::to_string(v) +
                         " is out of range"};
        ids.push_back(int32_t(v));
      }
    } else {
      throw RunError{file + ": expected int32 or int64 token ids, found '" +
                     npyDTypeDescr(a.dtype) + "'"};
    }
  } else {
    const Tokenizer &tok = needTokenizer(model);
    std::string text = readFile(file);
    ids = orFail(tok.encode(text, /*parseSpecial=*/true));
  }
  int64_t maxPos = model.info().maxPositions;
  if (maxPos > 0 && o.ctx > maxPos)
    throw RunError{"--ctx " + std::to_string(o.ctx) +
                   " exceeds the model's max_position_embeddings " +
                   std::to_string(maxPos)};
  PerplexityResult r = orFail(perplexity(model, ids, o.ctx, o.prefillChunk));
  if (o.json) {
    nlohmann::json j = {{"ppl", r.ppl},
                        {"mean_nll", r.meanNll},
                        {"tokens", r.tokens},
                        {"windows", r.windows},
                        {"ctx", std::min<int64_t>(o.ctx, int64_t(ids.size()))},
                        {"text_tokens", ids.size()}};
    std::cout << jsonDump(j) << "\n";
  } else {
    std::printf("perplexity %.6f (mean NLL %.6f) over %lld tokens in %lld "
                "windows of %lld\n",
                r.ppl, r.meanNll, (long long)r.tokens, (long long)r.windows,
                (long long)std::min<int64_t>(o.ctx, int64_t(ids.size())));
  }
  return 0;
}

int runGenerate(Model &model, const Options &o) {
  std::vector<int32_t> prompt;
  if (!o.promptIds.empty()) {
    prompt = parseIds(o.promptIds);
  } else {
    const Tokenizer &tok = needTokenizer(model);
    std::string text = o.hasPrompt ? o.prompt : readFile(o.promptFile);
    if (o.chat) {
      std::vector<ChatMessage> messages;
      if (!o.system.empty())
        messages.push_back({"system", o.system});
      messages.push_back({"user", text});
      prompt = orFail(tok.encodeChat(messages, /*addGenerationPrompt=*/true,
                                     /*enableThinking=*/!o.noThink));
    } else {
      prompt = orFail(tok.encode(text, /*parseSpecial=*/true));
    }
  }
  if (prompt.empty())
    throw RunError{"the prompt is empty"};
  if (int64_t(prompt.size()) > o.maxPromptTokens)
    throw RunError{"the prompt has " + std::to_string(prompt.size()) +
                   " tokens, more than --max-prompt-tokens " +
                   std::to_string(o.maxPromptTokens)};
  int64_t maxPos = model.info().maxPositions;
  if (maxPos > 0 && int64_t(prompt.size()) + o.n > maxPos)
    throw RunError{"the prompt (" + std::to_string(prompt.size()) +
                   " tokens) + -n " + std::to_string(o.n) + " = " +
                   std::to_string(int64_t(prompt.size()) + o.n) +
                   " exceeds the model's max_position_embeddings " +
                   std::to_string(maxPos)};

  const Tokenizer *tok = model.tokenizer();
  GenerateOptions g;
  g.maxNewTokens = o.n;
  g.sampling = o.sampling;
  g.ignoreEos = o.ignoreEos;
  g.prefillChunk = o.prefillChunk;
  g.keepPromptLogits = !o.dumpLogits.empty();
  std::vector<int32_t> stops = tok ? tok->stopIds() : model.info().eosIds;
  auto isStop = [&](int32_t id) {
    return std::find(stops.begin(), stops.end(), id) != stops.end();
  };
  std::optional<StreamDecoder> stream;
  if (!o.json && tok) {
    stream.emplace(*tok);
    g.onToken = [&](int32_t id) {
      if (!o.ignoreEos && isStop(id))
        return true;
      Result<std::string> piece = stream->push(id);
      if (piece.isOk()) {
        std::fwrite(piece->data(), 1, piece->size(), stdout);
        std::fflush(stdout);
      }
      return true;
    };
  }
  int64_t k = orFail(serve::specDrafts(model, o.spec));
  SpecStats spec;
  GenerateResult r =
      !model.device() && g.maxNewTokens > 0 // -n 0: the prompt's logits only
          ? orFail(
                serve::generateOne(model, prompt, g, int(k), o.engine, &spec))
          : k > 0 ? orFail(generateSpeculative(model, prompt, g, int(k), &spec))
                  : orFail(generate(model, prompt, g));

  if (!o.dumpLogits.empty()) {
    Status s = writeNpyF32(o.dumpLogits, {int64_t(r.promptLogits.size())},
                           r.promptLogits);
    if (!s.isOk())
      fail(s);
  }
  // The generated text, without a final stop token.
  std::vector<int32_t> shown = r.tokens;
  if (r.stop == StopReason::StopToken && !shown.empty())
    shown.pop_back();
  const GenerateStats &st = r.stats;
  if (o.json) {
    // The ids are the result; an id the tokenizer has no token for (a model
    // whose vocabulary is larger than its tokenizer's) leaves the text out
    // and says why instead of losing them.
    nlohmann::json text = "";
    std::string textError;
    if (tok) {
      Result<std::string> decoded = tok->decode(shown);
      if (decoded.isOk()) {
        text = std::move(decoded).value();
      } else {
        text = nullptr;
        textError = decoded.status().message();
        std::fprintf(stderr, "kiln-run: warning: no text for the ids: %s\n",
                     textError.c_str());
      }
    }
    nlohmann::json stats = {{"ttft_s", st.ttftS},
                            {"prefill_tok_s", st.prefillTokPerS},
                            {"decode_tok_s", st.decodeTokPerS},
                            {"prompt_tokens", st.promptTokens},
                            {"generated_tokens", st.generatedTokens},
                            {"threads", model.threads()}};
    if (k > 0)
      stats["spec"] = {
          {"k", k},
          {"rounds", spec.rounds},
          {"mean_accepted", spec.meanAccepted()},
          {"accept_rate_by_position", spec.acceptRateByPosition()}};
    nlohmann::json j = {
        {"prompt_ids", prompt},
        {"ids", r.tokens},
        {"text", text},
        {"stop", r.stop == StopReason::StopToken ? "stop_token" : "length"},
        {"stats", stats}};
    if (!textError.empty())
      j["text_error"] = textError;
    std::cout << jsonDump(j) << "\n";
  } else {
    if (stream) {
      std::string rest = stream->flush();
      std::fwrite(rest.data(), 1, rest.size(), stdout);
    } else {
      for (int32_t id : r.tokens)
        std::printf("%d ", id);
    }
    std::printf("\n");
    std::fflush(stdout);
    std::fprintf(stderr,
                 "kiln-run: %lld prompt tokens, %lld generated (%s), %d "
                 "threads\n"
                 "kiln-run: time to first token %.3f s\n"
                 "kiln-run: prefill %.1f tok/s\n"
                 "kiln-run: decode %.1f tok/s\n",
                 (long long)st.promptTokens, (long long)st.generatedTokens,
                 r.stop == StopReason::StopToken ? "stop token" : "length",
                 model.threads(), st.ttftS, st.prefillTokPerS,
                 st.decodeTokPerS);
    if (k > 0) {
      std::string rates;
      for (double r : spec.acceptRateByPosition())
        rates += (rates.empty() ? "" : " ") + std::to_string(r).substr(0, 5);
      std::fprintf(stderr,
                   "kiln-run: speculative k=%lld: %lld rounds, mean accepted "
                   "%.3f, accept rate by position [%s]\n",
                   (long long)k, (long long)spec.rounds, spec.meanAccepted(),
                   rates.c_str());
    }
  }
  return 0;
}

int runBatch(Model &model, const Options &o) {
  tools::BatchFileOptions b;
  b.input = o.batchFile;
  b.output = o.output;
  b.engine = o.engine;
  int64_t k = orFail(serve::specDrafts(model, o.spec));
  b.engine.specK = int(k);
  b.defaults.maxTokens = o.n;
  b.defaults.sampling = o.sampling;
  b.defaults.ignoreEos = o.ignoreEos;
  b.maxPromptTokens = o.maxPromptTokens;
  return orFail(tools::runBatchFile(model, b));
}

} // namespace

int main(int argc, char **argv) {
  Options o =
      tools::parseOrExit("kiln-run", [&] { return parseArgs(argc, argv); });
  // Under mpirun (a split artifact, kiln-compile --tp/--ep N): every rank
  // runs every step on its own share; rank 0 alone writes what a single
  // process writes.
  std::unique_ptr<comm::Communicator> comm;
  try {
    comm = orFail(comm::makeCommunicator(comm::CommKind::Auto));
    std::string path = orFail(tools::rankArtifact(o.model, *comm));
    if (comm->rank() != 0) {
      o.dumpLogits.clear();
      o.output.clear();
    }
    LoadOptions load;
    load.threads = int(o.threads);
    load.pinThreads = o.pinThreads;
    load.verifyChecksums = o.verify;
    load.comm = comm.get();
    load.forDevice = o.device == "hip";
    std::unique_ptr<Model> model = orFail(Model::load(path, load));
    if (o.device == "hip") {
      hip::HipPlanOptions hipOptions;
      hipOptions.slots = o.gpuSlots;
      // The engine of --batch-file runs up to --max-running sequences.
      if (!o.batchFile.empty() && !o.gpuSlotsSet)
        hipOptions.slots = std::min<int64_t>(o.engine.maxRunning, 4096);
      hipOptions.capacity = o.gpuCtx;
      hipOptions.pageRows = o.engine.pageRows;
      hipOptions.target = o.gpuTarget;
      orFail(model->attachDevice(
          orFail(hip::HipPlanDevice::create(*model, hipOptions))));
    }
    // How many plan calls ran as one HIP graph launch (stderr).
    auto reportGraphs = [&] {
      if (auto *hip = dynamic_cast<hip::HipPlanDevice *>(model->device()))
        std::fprintf(stderr,
                     "kiln-run: %s: %lld plan call(s) as one HIP graph "
                     "launch, %lld graph(s) captured\n",
                     hip->name().c_str(), (long long)hip->graphLaunches(),
                     (long long)hip->graphsCaptured());
    };
    if (!o.batchFile.empty()) {
      int batchRc = runBatch(*model, o);
      reportGraphs();
      return batchRc;
    }
    // Data-parallel attention: one prompt is the first group's request
    // (ranks 0 .. tp - 1); the other ranks join its plan calls with no
    // tokens of their own.
    int rc = 0;
    if (!model->info().attentionDataParallel ||
        comm->rank() < model->info().tensorParallel)
      rc = o.perplexityFile.empty() ? runGenerate(*model, o)
                                    : runPerplexity(*model, o);
    orFail(model->idle());
    reportGraphs();
    return rc;
  } catch (const UsageError &e) {
    std::fprintf(stderr, "kiln-run: %s\n", e.message.c_str());
    return 2;
  } catch (const RunError &e) {
    // A rank that fails ends the others at once instead of leaving them in
    // a collective until the timeout.
    if (comm && comm->size() > 1)
      comm->abortAll("kiln-run: " + e.message);
    std::fprintf(stderr, "kiln-run: %s\n", e.message.c_str());
    return 1;
  }
}
