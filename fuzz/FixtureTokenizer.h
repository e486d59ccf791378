//===- FixtureTokenizer.h - The fixture tokenizer for harnesses -*- C++ -*-===//
//
// The GLM tokenizer of test/fixtures/glm5-tiny-dev (byte-level BPE, 2048
// ids, the GLM special tokens), loaded once per process. Set
// KILN_FUZZ_TOKENIZER to fuzz with another tokenizer.json.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FUZZ_FIXTURETOKENIZER_H
#define KILN_FUZZ_FIXTURETOKENIZER_H

#include "fuzz/FuzzUtil.h"
#include "runtime/tokenizer/Tokenizer.h"

namespace kiln::fuzz {

inline const Tokenizer &fixtureTokenizer() {
  static const Tokenizer *tokenizer = [] {
    const char *env = std::getenv("KILN_FUZZ_TOKENIZER");
    std::string path =
        env && *env ? env
                    : sourcePath("test/fixtures/glm5-tiny-dev/tokenizer.json");
    Result<TokenizerData> data = parseTokenizerJson(path);
    if (!data.isOk()) {
      std::fprintf(stderr, "cannot load the fixture tokenizer: %s\n",
                   data.status().toString().c_str());
      std::abort();
    }
    Result<Tokenizer> built = Tokenizer::create(std::move(*data));
    if (!built.isOk()) {
      std::fprintf(stderr, "cannot build the fixture tokenizer: %s\n",
                   built.status().toString().c_str());
      std::abort();
    }
    return new Tokenizer(std::move(*built)); // lives until exit
  }();
  return *tokenizer;
}

} // namespace kiln::fuzz

#endif // KILN_FUZZ_FIXTURETOKENIZER_H
