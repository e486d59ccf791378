//===- TokenizerTable.h - TokenizerData <-> the artifact table --*- C++ -*-===//
//
// The compiler stores the tokenizer it parsed from tokenizer.json in the
// artifact's Tokenizer table; the runtime reads it back. Only FlatBuffers and
// the shared TokenizerData (support/tokenizer) are involved: part of the
// artifact schema the compiler may use.
//
// The table holds one optional Split step (pattern + behavior) followed by
// the ByteLevel flags (add_prefix_space, use_regex). TokenizerData that the
// table cannot represent exactly (another pre-tokenizer sequence, an
// inverted split, an unk token, ignore_merges, non-GLM chat tokens, a merge
// side containing a space) is rejected with an error naming the field, never
// silently changed: tokenizerFromFlatbuffer(tokenizerToFlatbuffer(d)) == d.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_TOKENIZERTABLE_H
#define KILN_RUNTIME_ARTIFACT_TOKENIZERTABLE_H

#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/Status.h"
#include "support/tokenizer/TokenizerData.h"

#include <string>

namespace kiln::artifact {

/// Serializes `data` (and the checkpoint's chat template, kept verbatim for
/// kiln-dump) into `builder`.
Result<flatbuffers::Offset<fb::Tokenizer>>
tokenizerToFlatbuffer(flatbuffers::FlatBufferBuilder &builder,
                      const TokenizerData &data,
                      const std::string &chatTemplate = "");

/// Rebuilds the TokenizerData from a verified table. Errors name the field
/// ("tokenizer.merges[12]: ...").
Result<TokenizerData> tokenizerFromFlatbuffer(const fb::Tokenizer &table);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_TOKENIZERTABLE_H
