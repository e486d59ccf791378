//===- fuzz_index.cpp - Checkpoint::open on a fuzzed sharded index
//---------===//
//
// The input is a model.safetensors.index.json. It is written into a scratch
// checkpoint folder that holds two small valid shards (IndexShards.h), and
// the folder is opened with Checkpoint::open. An accepted checkpoint must
// list every tensor exactly once, in order, and find() each of them.
//
//===----------------------------------------------------------------------===//

#include "frontends/glm/Checkpoint.h"
#include "fuzz/FuzzUtil.h"
#include "fuzz/IndexShards.h"

using namespace kiln;
using namespace kiln::glm;

namespace {

const std::string &checkpointDir() {
  static const std::string dir = [] {
    const std::string &d = fuzz::scratchDir();
    if (!fuzz::writeIndexShards(d)) {
      std::fprintf(stderr, "cannot write the index harness's shards\n");
      std::abort();
    }
    return d;
  }();
  return dir;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &dir = checkpointDir();
  fuzz::writeFileOrDie(dir + "/" + kIndexFileName, data, size);
  Result<Checkpoint> ckpt = Checkpoint::open(dir);
  if (!ckpt.isOk())
    return 0;
  KILN_FUZZ_CHECK(ckpt->isSharded(), "an index opened as a single file");
  KILN_FUZZ_CHECK(ckpt->names().size() == ckpt->size(), "names vs size");
  for (size_t i = 0; i < ckpt->names().size(); ++i) {
    const std::string &name = ckpt->names()[i];
    if (i)
      KILN_FUZZ_CHECK(ckpt->names()[i - 1] < name, "names not sorted");
    const TensorInfo *info = ckpt->find(name);
    KILN_FUZZ_CHECK(info && info->name == name, "find(%s)", name.c_str());
    KILN_FUZZ_CHECK(ckpt->get(name).isOk(), "get(%s)", name.c_str());
  }
  KILN_FUZZ_CHECK(!ckpt->get("no.such.tensor").isOk(), "get(missing)");
  return 0;
}
