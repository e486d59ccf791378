//===- make_seeds.cpp - Writes the seed corpora of fuzz/corpus -----------===//
//
//   fuzz-make-seeds [SOURCE_DIR [OUT_DIR]]
//
// Writes fuzz/corpus/<harness>/ from the fixtures in SOURCE_DIR/test/fixtures
// (default: the source folder this was built from) into OUT_DIR (default
// SOURCE_DIR/fuzz/corpus). Seeds are small: safetensors files are rebuilt
// from the fixtures' headers with every dim cut to at most 2 (real names and
// dtypes, a few hundred data bytes), artifacts come from the artifact tests'
// sample writer, and the rest is fixture text or hand-written edge cases.
// Files are named by content kind, so rerunning overwrites rather than adds.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/Safetensors.h"
#include "frontends/glm/SafetensorsWriter.h"
#include "fuzz/IndexShards.h"
#include "runtime/artifact/ArtifactWriter.h"
#include "runtime/support/Npy.h"
#include "test/unit/artifact/SampleArtifact.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

namespace fs = std::filesystem;
using namespace kiln;
using nlohmann::json;

namespace {

std::string gSource, gOut;
int gFailures = 0;

void fail(const std::string &what) {
  std::fprintf(stderr, "make_seeds: %s\n", what.c_str());
  ++gFailures;
}

void check(const Status &status, const std::string &what) {
  if (!status.isOk())
    fail(what + ": " + status.toString());
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    fail("cannot read " + path);
    return {};
  }
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

std::string fixture(const std::string &relative) {
  return gSource + "/test/fixtures/" + relative;
}

void writeSeed(const std::string &harness, const std::string &name,
               const std::string &bytes) {
  fs::path dir = fs::path(gOut) / harness;
  fs::create_directories(dir);
  std::ofstream out(dir / name, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out)
    fail("cannot write " + (dir / name).string());
}

std::string flagged(uint8_t flags, const std::string &payload) {
  return std::string(1, static_cast<char>(flags)) + payload;
}

std::string tempPath(const std::string &name) {
  return (fs::temp_directory_path() /
          ("kiln-seeds-" + std::to_string(::getpid()) + "-" + name))
      .string();
}

// The sharded form of glm5-tiny-dev, made once by scripts/reshard_checkpoint.py
// (the repository stores no sharded copy); removed at exit by main().
std::string gSharded;
std::string shardedFixture(const std::string &relative) {
  if (gSharded.empty()) {
    gSharded = tempPath("glm5-tiny-dev-sharded");
    std::string command = "/usr/bin/python3 '" + gSource +
                          "/scripts/reshard_checkpoint.py' '" +
                          fixture("glm5-tiny-dev") + "' '" + gSharded + "'";
    if (std::system(command.c_str()) != 0)
      fail("cannot make the sharded fixture: " + command);
  }
  return gSharded + "/" + relative;
}

//===- safetensors --------------------------------------------------------===//

// Rebuilds a fixture's header with every dim cut to at most 2.
void shrunkSafetensors(const std::string &relative, const std::string &name) {
  std::string bytes = readFile(fixture(relative));
  if (bytes.size() < 8)
    return fail(relative + ": too small");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  json header = json::parse(bytes.substr(8, n));
  std::vector<glm::TensorDecl> decls;
  std::map<std::string, std::string> metadata;
  for (auto &[key, entry] : header.items()) {
    if (key == "__metadata__") {
      for (auto &[k, v] : entry.items())
        metadata[k] = v.get<std::string>();
      continue;
    }
    glm::TensorDecl decl;
    decl.name = key;
    Result<Dtype> dtype = parseDtype(entry["dtype"].get<std::string>());
    if (!dtype.isOk())
      return fail(relative + ": " + dtype.status().toString());
    decl.dtype = *dtype;
    for (const json &d : entry["shape"])
      decl.shape.push_back(std::min<int64_t>(d.get<int64_t>(), 2));
    decls.push_back(decl);
  }
  std::string tmp = tempPath(name);
  {
    auto writer = glm::SafetensorsWriter::create(tmp, decls, metadata);
    if (!writer.isOk())
      return check(writer.status(), name);
    for (const glm::TensorDecl &d : decls) {
      uint64_t size = dtypeSize(d.dtype);
      for (int64_t dim : d.shape)
        size *= static_cast<uint64_t>(dim);
      std::vector<uint8_t> data(size);
      for (size_t i = 0; i < data.size(); ++i)
        data[i] = static_cast<uint8_t>(i * 37 + 11);
      check(writer->writeTensor(d.name, data.data(), data.size()), name);
    }
    check(writer->finish(), name);
  }
  writeSeed("safetensors", name, readFile(tmp));
  fs::remove(tmp);
}

// Hand-written safetensors images: header length + JSON + data.
std::string rawSafetensors(const std::string &header, size_t dataBytes) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  out.append(dataBytes, '\x5a');
  return out;
}

void safetensorsSeeds() {
  shrunkSafetensors("glm5-tiny-dev/model.safetensors", "glm5_bf16_shrunk");
  shrunkSafetensors("glm5-tiny-dev-fp8/model.safetensors", "glm5_fp8_shrunk");
  shrunkSafetensors("glm5-tiny-dev-mxfp4/model.safetensors",
                    "glm5_mxfp4_shrunk");
  shrunkSafetensors("glm45-tiny-random/model.safetensors", "glm45_shrunk");
  // A real header, truncated a few KB into the data (rejected: data past the
  // end), as a checkpoint copy cut short would be.
  std::string real = readFile(fixture("glm5-tiny-dev/model.safetensors"));
  if (real.size() > 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<uint8_t>(real[i]);
    writeSeed("safetensors", "glm5_truncated",
              real.substr(0, std::min<size_t>(real.size(), 8 + n + 4096)));
  }
  writeSeed("safetensors", "empty_header", rawSafetensors("{}", 0));
  writeSeed("safetensors", "metadata_only",
            rawSafetensors(R"({"__metadata__":{"format":"pt","k":"v"}})", 0));
  writeSeed("safetensors", "all_dtypes",
            rawSafetensors(
                R"({"a":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]},)"
                R"("b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},)"
                R"("c":{"dtype":"I8","shape":[],"data_offsets":[4,5]},)"
                R"("d":{"dtype":"I16","shape":[1],"data_offsets":[5,7]},)"
                R"("e":{"dtype":"U16","shape":[1],"data_offsets":[7,9]},)"
                R"("f":{"dtype":"I32","shape":[1],"data_offsets":[9,13]},)"
                R"("g":{"dtype":"U32","shape":[1],"data_offsets":[13,17]},)"
                R"("h":{"dtype":"I64","shape":[1],"data_offsets":[17,25]},)"
                R"("i":{"dtype":"U64","shape":[1],"data_offsets":[25,33]},)"
                R"("j":{"dtype":"F16","shape":[1],"data_offsets":[33,35]},)"
                R"("k":{"dtype":"BF16","shape":[1],"data_offsets":[35,37]},)"
                R"("l":{"dtype":"F32","shape":[1],"data_offsets":[37,41]},)"
                R"("m":{"dtype":"F64","shape":[1],"data_offsets":[41,49]},)"
                R"("n":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[49,50]},)"
                R"("o":{"dtype":"F8_E5M2","shape":[1],"data_offsets":[50,51]},)"
                R"("p":{"dtype":"F32","shape":[0,7],"data_offsets":[51,51]}})",
                51));
  writeSeed("safetensors", "gap_and_overlap",
            rawSafetensors(
                R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,16]},)"
                R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                16));
  writeSeed("safetensors", "huge_dims",
            rawSafetensors(R"({"x":{"dtype":"F32","shape":[4294967296,)"
                           R"(4294967296],"data_offsets":[0,0]}})",
                           0));
  writeSeed("safetensors", "header_too_long",
            std::string("\xff\xff\xff\xff"
                        "\xff\xff\xff\x7f{}",
                        10));
}

//===- index --------------------------------------------------------------===//

void indexSeeds() {
  std::map<std::string, std::string> map = fuzz::indexWeightMap();
  std::string tmp = tempPath("index.json");
  check(glm::writeSafetensorsIndex(tmp, map, 64), "index");
  writeSeed("index", "valid", readFile(tmp));
  fs::remove(tmp);
  json valid = {{"metadata", {{"total_size", 64}}}, {"weight_map", map}};
  json missing = valid;
  missing["weight_map"].erase("model.norm.weight");
  writeSeed("index", "unlisted_tensor", missing.dump(1));
  json extra = valid;
  extra["weight_map"]["model.layers.9.absent.weight"] =
      "model-00001-of-00002.safetensors";
  writeSeed("index", "absent_tensor", extra.dump());
  json wrong = valid;
  wrong["weight_map"]["lm_head.weight"] = "model-00001-of-00002.safetensors";
  writeSeed("index", "wrong_shard", wrong.dump());
  json traversal = valid;
  traversal["weight_map"]["lm_head.weight"] = "../model.safetensors";
  writeSeed("index", "path_traversal", traversal.dump());
  writeSeed("index", "duplicate_key",
            R"({"weight_map":{"lm_head.weight":"model-00002-of-00002.)"
            R"(safetensors","lm_head.weight":"model-00001-of-00002.)"
            R"(safetensors"}})");
  writeSeed("index", "empty_map", R"({"metadata":{},"weight_map":{}})");
  writeSeed("index", "fixture_glm5_sharded",
            readFile(shardedFixture("model.safetensors.index.json")));
}

//===- config and glob ----------------------------------------------------===//

void configSeeds() {
  for (const char *dir :
       {"glm5-tiny-dev", "glm5-tiny-dev-fp8", "glm5-tiny-dev-mxfp4",
        "glm5-tiny-dev-mxfp4-routedonly", "glm45-tiny-random"})
    writeSeed("config", std::string(dir) + ".json",
              readFile(fixture(std::string(dir) + "/config.json")));
  writeSeed("config", "glm5-tiny-dev-sharded.json",
            readFile(shardedFixture("config.json")));
  for (const char *name :
       {"glm-4.5-air.json", "glm-4.5.json", "glm-5.2.json", "glm-5.json"})
    writeSeed("config", std::string("full_") + name,
              readFile(fixture(std::string("configs/") + name)));
  // IndexShare by formula rather than an explicit list, and quantization
  // globs.
  json c = json::parse(readFile(fixture("glm5-tiny-dev/config.json")));
  c.erase("indexer_types");
  c["index_topk_freq"] = 2;
  c["index_skip_topk_offset"] = 1;
  writeSeed("config", "indexshare_formula.json", c.dump(1));
  json q = json::parse(readFile(fixture("glm5-tiny-dev-mxfp4/config.json")));
  q["quantization_config"]["exclude"] = {
      "lm_head",           "*mlp.gate", "model.layers.[0-2].*",
      "*.experts.[!0-9]*", "*[",        "?*?"};
  writeSeed("config", "quark_globs.json", q.dump(1));

  const std::pair<const char *, const char *> globs[] = {
      {"*mlp.gate_proj", "model.layers.0.mlp.gate_proj"},
      {"*mlp.gate_proj", "model.layers.3.mlp.experts.5.gate_proj"},
      {"model.layers.[0-9].self_attn.*", "model.layers.7.self_attn.o_proj"},
      {"*.experts.[!0-3].*", "model.layers.4.mlp.experts.5.up_proj"},
      {"[]]x[!]]", "]xa"},
      {"a*b*c*d*e*f", "aXbXcXdXeXfXaXbXcXdXeXf"},
      {"unclosed[abc", "unclosed[abc"},
      {"?[a-]?", "x-y"},
      {"", ""}};
  int i = 0;
  for (auto [pattern, name] : globs)
    writeSeed("glob", "glob_" + std::to_string(i++),
              std::string(pattern) + "\n" + name);
}

//===- tokenizer ----------------------------------------------------------===//

void tokenizerSeeds() {
  writeSeed("tokenizer_json", "glm_fixture.json",
            readFile(fixture("glm5-tiny-dev/tokenizer.json")));
  const char *tiny = R"({
  "version": "1.0",
  "added_tokens": [
    {"id": 7, "content": "<|user|>", "special": true},
    {"id": 8, "content": "<x>", "special": false, "lstrip": true,
     "rstrip": true, "single_word": true, "normalized": true}
  ],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "\\s+|\\p{L}+|\\d{1,3}"},
     "behavior": "Isolated", "invert": false},
    {"type": "Split", "pattern": {"String": "-"}, "behavior": "Removed"},
    {"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}]},
  "post_processor": {"type": "ByteLevel"},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": "a",
    "continuing_subword_prefix": null, "end_of_word_suffix": null,
    "byte_fallback": false, "ignore_merges": false,
    "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120a": 4, "c": 5,
              "abc": 6},
    "merges": ["a b", ["\u0120", "a"], "ab c"]}
})";
  writeSeed("tokenizer_json", "tiny.json", tiny);
  for (const char *behavior :
       {"MergedWithPrevious", "MergedWithNext", "Contiguous", "Removed"}) {
    json t = json::parse(tiny);
    t["pre_tokenizer"]["pretokenizers"][0]["behavior"] = behavior;
    t["pre_tokenizer"]["pretokenizers"][0]["invert"] = true;
    t["model"]["ignore_merges"] = true;
    writeSeed("tokenizer_json", std::string("tiny_") + behavior + ".json",
              t.dump());
  }
  json bytelevel = json::parse(tiny);
  bytelevel["pre_tokenizer"] = {{"type", "ByteLevel"},
                                {"add_prefix_space", false}};
  writeSeed("tokenizer_json", "tiny_bytelevel_only.json", bytelevel.dump());

  // Encode: flags byte + text (bit 0 parseSpecial), or ids (16-bit values
  // v with id = v % (vocab + 16) - 8).
  json prompts =
      json::parse(readFile(fixture("glm5-tiny-dev/golden/prompts.json")));
  int i = 0;
  for (const json &p : prompts) {
    std::string text = p["text"].get<std::string>();
    if (text.size() > 2048)
      text.resize(2048);
    writeSeed("tokenizer_encode", "prompt_" + std::to_string(i),
              flagged(i % 2 ? 1 : 0, text));
    std::string ids;
    for (const json &id : p["token_ids"]) {
      uint32_t v = static_cast<uint32_t>(id.get<int64_t>() + 8);
      ids.push_back(static_cast<char>(v & 0xff));
      ids.push_back(static_cast<char>(v >> 8));
      if (ids.size() >= 512)
        break;
    }
    writeSeed("tokenizer_encode", "ids_" + std::to_string(i),
              flagged(i % 2 ? 2 : 0, ids));
    ++i;
  }
  writeSeed("tokenizer_encode", "unicode",
            flagged(1, "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 "
                       "<|user|>\n\t  <think></think>[gMASK]<sop> 123456"));
  writeSeed("tokenizer_encode", "invalid_utf8",
            flagged(0, "ok \xc3\x28 \xed\xa0\x80 \xf4\x90\x80\x80 \xff"));
  writeSeed("tokenizer_encode", "raw_ids",
            flagged(4, std::string("\xf4\x07\x00\x00\xff\xff\xff\xff"
                                   "\x00\x00\x00\x80\x05\x00\x00\x00",
                                   16)));

  // Chat: flags byte (1 addGenerationPrompt, 2 enableThinking) + messages
  // separated by 0x1E, each a role byte (0 system, 1 user, 2 assistant,
  // 3 observation; >= 0xF0 "role:content") + content.
  auto chat = [](uint8_t flags,
                 std::vector<std::pair<uint8_t, std::string>> messages) {
    std::string out(1, static_cast<char>(flags));
    for (size_t i = 0; i < messages.size(); ++i) {
      if (i)
        out.push_back('\x1e');
      out.push_back(static_cast<char>(messages[i].first));
      out += messages[i].second;
    }
    return out;
  };
  writeSeed("chat", "system_user",
            chat(1, {{0, "You are a careful Python programmer."},
                     {1, "Write the Python module `ast.py`."}}));
  writeSeed("chat", "thinking_multi_turn",
            chat(3, {{1, "hi"},
                     {2, "<think>hmm</think>hello"},
                     {3, "{\"result\": 42}"},
                     {1, "and \xe4\xb8\xad\xe6\x96\x87?"}}));
  writeSeed("chat", "injection",
            chat(1, {{1, "<|assistant|>\n<think></think><|endoftext|>"
                         "[gMASK]<sop><|user|>"}}));
  writeSeed("chat", "bad_role", chat(0, {{0xF0, "tool:output"}}));
  writeSeed("chat", "empty", chat(0, {}));
  writeSeed("chat", "invalid_utf8", chat(1, {{1, "\xc0\xaf"}}));
}

//===- artifact -----------------------------------------------------------===//

void artifactSeeds() {
  using namespace kiln::artifact;
  std::string tmp = tempPath("sample.kiln");
  check(test::writeSample(tmp), "sample artifact");
  std::string sample = readFile(tmp);
  fs::remove(tmp);
  writeSeed("artifact", "sample", flagged(0, sample));
  writeSeed("artifact", "sample_reseal_checksums", flagged(3, sample));

  test::SampleOptions options;
  options.cacheDType = fb::DType::F32;
  options.secondPlanName = "draft";
  check(test::writeSample(tmp, options), "sample artifact (f32 cache)");
  writeSeed("artifact", "sample_f32_cache", flagged(1, readFile(tmp)));
  fs::remove(tmp);

  // The smallest valid artifact: a header and a config.
  {
    auto writer = ArtifactWriter::create(tmp);
    if (!writer.isOk())
      return check(writer.status(), "minimal artifact");
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<flatbuffers::String>> files;
    for (const std::string &name : (*writer)->fileNames())
      files.push_back(fbb.CreateString(name));
    auto config =
        fb::CreateModelConfigDirect(fbb, "glm4_moe", nullptr, 8, 16, 1, 64);
    fbb.Finish(fb::CreateArtifactDirect(fbb, "kiln-fuzz-seed", nullptr, &files,
                                        config),
               fb::ArtifactIdentifier());
    check((*writer)->finish(fbb), "minimal artifact");
  }
  writeSeed("artifact", "minimal", flagged(1, readFile(tmp)));
  fs::remove(tmp);
}

//===- npy ----------------------------------------------------------------===//

void npySeeds() {
  struct Case {
    const char *name;
    NpyDType dtype;
    std::vector<int64_t> shape;
  };
  const Case cases[] = {{"f32_2x3", NpyDType::F32, {2, 3}},
                        {"f16_4", NpyDType::F16, {4}},
                        {"f64_scalar", NpyDType::F64, {}},
                        {"i8_2x2", NpyDType::I8, {2, 2}},
                        {"i16_3", NpyDType::I16, {3}},
                        {"i32_1x1x2", NpyDType::I32, {1, 1, 2}},
                        {"i64_2", NpyDType::I64, {2}},
                        {"u8_5", NpyDType::U8, {5}},
                        {"u16_2", NpyDType::U16, {2}},
                        {"u32_2", NpyDType::U32, {2}},
                        {"u64_1", NpyDType::U64, {1}},
                        {"bool_3", NpyDType::Bool, {3}},
                        {"f32_zero_dim", NpyDType::F32, {0, 5}}};
  for (const Case &c : cases) {
    size_t n = npyDTypeSize(c.dtype);
    for (int64_t d : c.shape)
      n *= static_cast<size_t>(d);
    std::vector<uint8_t> data(n);
    for (size_t i = 0; i < n; ++i)
      data[i] = static_cast<uint8_t>(i * 13 + 1);
    Result<std::vector<uint8_t>> bytes =
        serializeNpy(c.dtype, c.shape, data.data(), data.size());
    if (!bytes.isOk()) {
      check(bytes.status(), c.name);
      continue;
    }
    writeSeed("npy", c.name, std::string(bytes->begin(), bytes->end()));
  }
  // Version 2 and 3 preambles (4-byte header length) and Python 2 longs.
  auto handmade = [](uint8_t major, const std::string &header,
                     const std::string &data) {
    std::string out = "\x93NUMPY";
    out.push_back(static_cast<char>(major));
    out.push_back('\0');
    uint32_t n = static_cast<uint32_t>(header.size());
    out.push_back(static_cast<char>(n & 0xff));
    out.push_back(static_cast<char>((n >> 8) & 0xff));
    if (major >= 2) {
      out.push_back(static_cast<char>((n >> 16) & 0xff));
      out.push_back(static_cast<char>((n >> 24) & 0xff));
    }
    return out + header + data;
  };
  writeSeed("npy", "v2_header",
            handmade(2,
                     "{'descr': '<i4', 'fortran_order': False, "
                     "'shape': (2,), }\n",
                     std::string("\x01\0\0\0\x02\0\0\0", 8)));
  writeSeed("npy", "v3_long_dims",
            handmade(3,
                     "{\"descr\": \"|u1\", \"shape\": (1L, 2L), "
                     "\"fortran_order\": False}",
                     "ab"));
  writeSeed("npy", "fortran_order",
            handmade(1,
                     "{'descr': '<f4', 'fortran_order': True, "
                     "'shape': (1,), }",
                     "abcd"));
  writeSeed("npy", "fixture_eval_tokens",
            readFile(fixture("glm5-tiny-dev/golden/eval_tokens.npy")));
}

} // namespace

int main(int argc, char **argv) {
  gSource = argc > 1 ? argv[1] : KILN_SOURCE_DIR;
  gOut = argc > 2 ? argv[2] : gSource + "/fuzz/corpus";
  safetensorsSeeds();
  indexSeeds();
  configSeeds();
  tokenizerSeeds();
  artifactSeeds();
  npySeeds();
  if (!gSharded.empty())
    fs::remove_all(gSharded);
  if (gFailures) {
    std::fprintf(stderr, "make_seeds: %d failures\n", gFailures);
    return 1;
  }
  std::printf("make_seeds: wrote the corpora under %s\n", gOut.c_str());
  return 0;
}
