//===- MlaReference.cpp - Unabsorbed MLA, the tests' reference ------------===//
//
// Straight from GLM.md 3.4 steps 5-7: decompress each key's k_nope and v from
// its c_kv with kv_b_proj, score [q_nope | q_pe] . [k_nope | k_pe], softmax,
// weighted sum of v. Sums in double; nothing is shared with the fast path
// except the weight decoder and the cache reader.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/attention/KvCache.h"
#include "runtime/cpu/attention/Mla.h"

#include <algorithm>
#include <cmath>
#include <vector>

using namespace kiln::cpu;

void kiln::cpu::mlaAttentionReference(const MlaArgs &a, float *out) {
  const MlaDims &d = a.dims;
  const int64_t L = d.latentDim, Dn = d.nopeDim, Dr = d.ropeDim,
                Dv = d.valueDim, H = d.heads;
  std::vector<float> w(size_t(H * (Dn + Dv) * L));
  for (int64_t r = 0; r < H * (Dn + Dv); ++r)
    dequantizeRow(a.kvB, r, w.data() + r * L);

  std::vector<float> row(static_cast<size_t>(L + Dr));
  std::vector<double> score, values;
  for (int64_t t = 0; t < a.tokens; ++t) {
    std::vector<int32_t> keys;
    if (a.topk) {
      for (int64_t i = 0; i < a.topkWidth; ++i)
        if (a.topk[t * a.topkWidth + i] >= 0)
          keys.push_back(a.topk[t * a.topkWidth + i]);
    } else {
      for (int32_t s = 0; s <= a.positions[t]; ++s)
        keys.push_back(s);
    }
    const int64_t n = int64_t(keys.size());
    for (int64_t h = 0; h < H; ++h) {
      const float *qn = a.qNope + (t * H + h) * Dn;
      const float *qp = a.qPe + (t * H + h) * Dr;
      const float *wk = w.data() + h * (Dn + Dv) * L;
      const float *wv = wk + Dn * L;
      score.assign(size_t(n), 0.0);
      values.assign(size_t(n * Dv), 0.0);
      for (int64_t s = 0; s < n; ++s) {
        kvReadRow(a.latent, a.seqIds[t], keys[s], 0, L + Dr, row.data());
        double dot = 0.0;
        for (int64_t i = 0; i < Dn; ++i) {
          double k = 0.0;
          for (int64_t j = 0; j < L; ++j)
            k += double(wk[i * L + j]) * row[j];
          dot += double(qn[i]) * k;
        }
        for (int64_t i = 0; i < Dr; ++i)
          dot += double(qp[i]) * row[L + i];
        score[s] = dot * a.scale;
        for (int64_t i = 0; i < Dv; ++i) {
          double v = 0.0;
          for (int64_t j = 0; j < L; ++j)
            v += double(wv[i * L + j]) * row[j];
          values[s * Dv + i] = v;
        }
      }
      const double m = n ? *std::max_element(score.begin(), score.end()) : 0.0;
      double sum = 0.0;
      for (double &s : score)
        sum += (s = std::exp(s - m));
      for (int64_t i = 0; i < Dv; ++i) {
        double o = 0.0;
        for (int64_t s = 0; s < n; ++s)
          o += score[s] * values[s * Dv + i];
        out[(t * H + h) * Dv + i] = n ? float(o / sum) : 0.0f;
      }
    }
  }
}
