//===- ArtifactChecks.h - The semantic walk over an artifact ----*- C++ -*-===//
//
// The second verification stage: the FlatBuffers verifier proved that the
// metadata can be read safely; these checks prove that what it says can be
// trusted: every file, extent, index, shape and size. Each message names the
// file and the field (e.g. "plans[0] 'decode' dispatches[3] args[1]") and
// says what was expected and what was found.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_ARTIFACTCHECKS_H
#define KILN_RUNTIME_ARTIFACT_ARTIFACTCHECKS_H

#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/Status.h"

#include <cstdint>
#include <string>

namespace kiln::artifact {

class Artifact;

/// Limits on shapes the runtime trusts.
inline constexpr size_t MAX_RANK = 8;
inline constexpr int64_t MAX_DIM = int64_t(1) << 40;
inline constexpr uint64_t MAX_ELEMENTS = uint64_t(1) << 50;
/// GPU scratch sizes per dispatch (per row, per position, fixed), bytes.
inline constexpr int64_t MAX_SCRATCH_BYTES = int64_t(1) << 40;
inline constexpr uint32_t MAX_FILES = 1 << 16;
/// Limits on ModelConfig, as config.json's (frontends/glm/Config.h), so that
/// sizes the runtime derives from them (hidden x tokens x 4 bytes, a row of
/// logits) cannot overflow. MAX_VOCAB_SIZE is the tokenizer's kMaxVocabSize.
inline constexpr int64_t MAX_HIDDEN_SIZE = int64_t(1) << 24;
inline constexpr int64_t MAX_VOCAB_SIZE = int64_t(1) << 24;
inline constexpr int64_t MAX_LAYERS = 4096;
inline constexpr int32_t MAX_MTP_LAYERS = 16;

/// FlatBuffers verifier limits. Deep enough for the schema (Artifact > plans
/// > Plan > dispatches > Dispatch > args is 6) with room for appended fields;
/// a GLM-5 plan set is a few tens of thousands of tables.
inline constexpr uint32_t MAX_METADATA_DEPTH = 32;
inline constexpr uint32_t MAX_METADATA_TABLES = 1u << 24;

/// The first verification stage of the metadata FlatBuffer: the FlatBuffers
/// verifier with the limits above, then the file identifier "KILN". The
/// writer runs it too, so it never writes metadata the loader rejects here.
Status verifyMetadata(const std::string &path, const uint8_t *data,
                      size_t size);

/// Bits per element of `dtype` (4 for F4E2M1); 0 for a value outside the
/// enum.
unsigned dtypeBits(fb::DType dtype);

/// The byte sizes a weight's segments must have.
struct WeightBytes {
  uint64_t elements = 0;
  uint64_t data = 0;
  uint64_t scales = 0; // 0: the layout has no scales
};

/// The sizes for a weight of this layout, dtype and shape, or an error
/// prefixed with `what` when the combination is invalid (unknown enum
/// values, non-positive or too large dims, a dtype the layout does not
/// allow, a last dim that is not a multiple of the block).
/// Sizes of an MXFP4 weight's GPU copy (WeightLayout Mxfp4Gpu): per
/// [N, K] matrix, ceil(N/16) x ceil(K/128) chunks of 64 lanes x 16 bytes
/// and ceil(N/16) x ceil(ceil(K/128)/4) words of 64 lanes x 4 bytes
/// (passes/codegen/rocdl/MfmaLayout.h, MxWeightLayout). The shape must
/// have passed expectedWeightBytes as Mxfp4.
WeightBytes mxfp4GpuBytes(const int64_t *shape, size_t rank);

Result<WeightBytes> expectedWeightBytes(fb::WeightLayout layout,
                                        fb::DType dtype, const int64_t *shape,
                                        size_t rank, const std::string &what);

/// Artifact.files: present, `fileCount` entries, each a plain file name
/// (no '/', not "." or ".."). Runs before the split files are opened.
Status checkFileList(const fb::Artifact &meta, const std::string &path,
                     uint32_t fileCount);

/// The semantic walk over an artifact whose files are all mapped.
Status checkSemantics(const Artifact &artifact);

/// The CRC32C of every weight and code object segment.
Status checkChecksums(const Artifact &artifact);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_ARTIFACTCHECKS_H
