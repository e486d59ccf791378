//===- PlanTable.h - Plans and caches into the artifact --------*- C++ -*-===//
//
// Writes support/abi/Program.h's plans and caches as the artifact's Plan and
// Cache tables (kiln_artifact.fbs): the one serialization the compiler
// (passes/emit/EmitArtifact.cpp) and the engine tests' hand-built artifacts
// share. The kernel table is the caller's: `kernelOf[i]` is the kernel
// table index of dispatch i.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_PLANTABLE_H
#define KILN_RUNTIME_ARTIFACT_PLANTABLE_H

#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/abi/Program.h"

#include <cstdint>
#include <vector>

namespace kiln::artifact {

flatbuffers::Offset<fb::Plan> writePlan(flatbuffers::FlatBufferBuilder &fbb,
                                        const abi::PlanSpec &plan,
                                        const std::vector<uint32_t> &kernelOf);

flatbuffers::Offset<fb::Cache> writeCache(flatbuffers::FlatBufferBuilder &fbb,
                                          const abi::CacheSpec &cache);

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_PLANTABLE_H
