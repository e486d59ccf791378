//===- ArtifactJson.h - A loaded artifact as JSON ---------------*- C++ -*-===//
//
// What kiln-dump prints: the config, files, targets, weights (totals and
// bits per parameter per layout; each tensor on request), caches, kernels,
// code objects, plans (buffers and dispatches on request, with kernel and
// argument names resolved) and a tokenizer summary. A library so tests can
// check the JSON without running the tool.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_DUMP_ARTIFACTJSON_H
#define KILN_TOOLS_KILN_DUMP_ARTIFACTJSON_H

#include "runtime/artifact/Artifact.h"
#include "support/Status.h"

#include <nlohmann/json.hpp>

#include <string>

namespace kiln::dump {

struct DumpOptions {
  bool weights = false; // list every weight, not only the totals
  bool plans = false;   // list every plan's buffers and dispatches
  /// When non-empty, write every code object to
  /// <dir>/<target>.<index>.<ext> and record the path in the JSON.
  std::string extractKernelsDir;
};

/// The artifact as JSON, keys in a fixed, readable order.
Result<nlohmann::ordered_json> dumpArtifact(const artifact::Artifact &artifact,
                                            const DumpOptions &options);

/// The file name a code object is extracted to: "<target>.<index>.so" for
/// x86_64, ".hsaco" for gfx* targets, ".bin" otherwise; an error if the
/// target is not a plain name ([A-Za-z0-9_-]).
Result<std::string> codeObjectFileName(const std::string &target,
                                       uint32_t index);

} // namespace kiln::dump

#endif // KILN_TOOLS_KILN_DUMP_ARTIFACTJSON_H
