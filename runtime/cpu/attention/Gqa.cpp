//===- Gqa.cpp ------------------------------------------------------------===//

#include "runtime/cpu/attention/Gqa.h"

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/attention/Attend.h"

#include <algorithm>

using namespace kiln::cpu;

static detail::AttendProblem problemOf(const GqaArgs &a, float *out) {
  detail::AttendProblem p;
  p.keys = a.keys;
  p.keyHeadStride = a.headDim;
  p.keyDim = a.headDim;
  p.values = a.values;
  p.valueHeadStride = a.valueDim;
  p.valueDim = a.valueDim;
  p.scale = a.scale;
  p.bf16 = bf16Activations() == Bf16Activations::BF16;
  p.tokens = a.tokens;
  p.seqIds = a.seqIds;
  p.positions = a.positions;
  p.q = a.q;
  p.qHeads = a.qHeads;
  p.kvHeads = a.kvHeads;
  p.out = out;
  return p;
}

size_t kiln::cpu::gqaWorkspaceBytes(const GqaArgs &args, int threads) {
  return detail::attendWorkspaceBytes(problemOf(args, nullptr), threads);
}

void kiln::cpu::gqaAttention(ThreadPool &pool, const GqaArgs &args, float *out,
                             Workspace &workspace) {
  if (args.tokens <= 0)
    return;
  const detail::AttendProblem p = problemOf(args, out);
  detail::attend(pool, p,
                 workspace.get(detail::attendWorkspaceBytes(p, pool.size())));
}
