//===- fuzz_artifact.cpp - Artifact::open on a fuzzed file 0 --------------===//
//
// Byte 0 of the input holds flags, the rest is file 0 of an artifact, written
// to a scratch folder and opened with Artifact::open:
//  * bit 0, reseal: before writing, fix the header's magic, version, header
//    size, file size, metadata CRC32C and header CRC32C, so that mutations
//    of the metadata reach the FlatBuffers verifier and the semantic walk
//    instead of stopping at a checksum;
//  * bit 1: verify the segment checksums too.
// Split files named by the metadata are looked up in the scratch folder,
// which holds nothing else. After a successful open every extent must be
// readable through bytes() (its first and last bytes are read) and every
// index the plans hold must be inside its table: Artifact.h promises that
// nothing the runtime reads through meta() can be out of bounds.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FuzzUtil.h"
#include "runtime/artifact/Artifact.h"
#include "runtime/artifact/ArtifactChecks.h"
#include "runtime/artifact/Crc32c.h"

#include <vector>

using namespace kiln;
using namespace kiln::artifact;

namespace {

void reseal(std::vector<uint8_t> &bytes) {
  if (bytes.size() < HEADER_SIZE)
    return;
  FileHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  std::memcpy(header.magic, MAGIC, sizeof(MAGIC));
  header.formatVersion = FORMAT_VERSION;
  header.headerSize = HEADER_SIZE;
  header.fileSize = bytes.size();
  uint64_t end;
  if (!__builtin_add_overflow(header.metadataOffset, header.metadataSize,
                              &end) &&
      end <= bytes.size())
    header.metadataCrc32c =
        crc32c(bytes.data() + header.metadataOffset, header.metadataSize);
  header.headerCrc32c = computeHeaderCrc(header);
  std::memcpy(bytes.data(), &header, sizeof(header));
}

volatile uint8_t sink;

void touch(const Artifact &art, const fb::Extent *extent, const char *what) {
  KILN_FUZZ_CHECK(extent, "%s: missing extent", what);
  const uint8_t *p = art.bytes(*extent);
  KILN_FUZZ_CHECK(p, "%s: bytes() is null after a successful open", what);
  if (extent->size() > 0)
    sink = sink + p[0] + p[extent->size() - 1];
}

template <typename T> uint32_t count(const flatbuffers::Vector<T> *v) {
  return v ? v->size() : 0;
}

void walk(const Artifact &art) {
  const fb::Artifact &meta = *art.meta();
  KILN_FUZZ_CHECK(meta.config(), "config");
  for (uint32_t i = 0; i < count(meta.weights()); ++i) {
    const fb::Weight &w = *meta.weights()->Get(i);
    touch(art, w.data(), "weight data");
    if (w.scales())
      touch(art, w.scales(), "weight scales");
    KILN_FUZZ_CHECK(w.shape()->size() <= MAX_RANK, "weight rank");
  }
  for (uint32_t i = 0; i < count(meta.code_objects()); ++i)
    touch(art, meta.code_objects()->Get(i)->data(), "code object");
  uint32_t kernels = count(meta.kernels()), weights = count(meta.weights()),
           caches = count(meta.caches());
  for (uint32_t i = 0; i < kernels; ++i) {
    const fb::Kernel &k = *meta.kernels()->Get(i);
    for (uint32_t j = 0; j < count(k.symbols()); ++j)
      KILN_FUZZ_CHECK(k.symbols()->Get(j)->code_object() <
                          count(meta.code_objects()),
                      "kernel symbol's code object");
  }
  for (uint32_t i = 0; i < count(meta.plans()); ++i) {
    const fb::Plan &plan = *meta.plans()->Get(i);
    KILN_FUZZ_CHECK(art.findPlan(plan.name()->string_view()), "findPlan");
    uint32_t buffers = count(plan.buffers());
    for (uint32_t b = 0; b < buffers; ++b) {
      const fb::Buffer &buf = *plan.buffers()->Get(b);
      KILN_FUZZ_CHECK(dtypeBits(buf.dtype()) != 0, "buffer dtype");
      for (uint32_t d = 0; d < count(buf.row_shape()); ++d)
        KILN_FUZZ_CHECK(buf.row_shape()->Get(d) >= 1, "row shape");
    }
    for (auto *list : {plan.inputs(), plan.outputs()})
      for (uint32_t j = 0; j < count(list); ++j)
        KILN_FUZZ_CHECK(list->Get(j) < buffers, "plan input/output");
    for (uint32_t d = 0; d < count(plan.dispatches()); ++d) {
      const fb::Dispatch &dis = *plan.dispatches()->Get(d);
      KILN_FUZZ_CHECK(dis.kernel() < kernels, "dispatch kernel");
      if (const auto *moe = dis.params_as_MoeParams())
        sink = sink + static_cast<uint8_t>(moe->top_k());
      for (uint32_t a = 0; a < count(dis.args()); ++a) {
        const fb::Arg &arg = *dis.args()->Get(a);
        uint32_t limit = arg.kind() == fb::ArgKind::Buffer   ? buffers
                         : arg.kind() == fb::ArgKind::Weight ? weights
                         : arg.kind() == fb::ArgKind::Cache  ? caches
                                                             : UINT32_MAX;
        KILN_FUZZ_CHECK(arg.kind() <= fb::ArgKind::MAX, "arg kind");
        KILN_FUZZ_CHECK(arg.index() < limit, "arg index");
      }
    }
  }
  if (const fb::Tokenizer *tok = meta.tokenizer())
    for (uint32_t i = 0; i < count(tok->added_tokens()); ++i) {
      int32_t id = tok->added_tokens()->Get(i)->id();
      KILN_FUZZ_CHECK(id >= 0 && id < meta.config()->vocab_size(),
                      "added token id");
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  uint8_t flags = data[0];
  std::vector<uint8_t> file(data + 1, data + size);
  if (flags & 1)
    reseal(file);
  static const std::string path = fuzz::scratchDir() + "/model.kiln";
  fuzz::writeFileOrDie(path, file.data(), file.size());
  OpenOptions options;
  options.verifyChecksums = flags & 2;
  Result<std::unique_ptr<Artifact>> art = Artifact::open(path, options);
  if (!art.isOk())
    return 0;
  walk(**art);
  return 0;
}
