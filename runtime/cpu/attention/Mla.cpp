//===- Mla.cpp - Absorbed MLA ---------------------------------------------===//
//
// Tokens are processed in chunks of kChunk so the workspace stays bounded. Per
// chunk: (1) q_lat = [W_UK_h^T q_nope | q_pe] for every (token, head),
// (2) latent attention through the shared core, (3) out = W_UV_h o_lat.
// Steps 1 and 3 run per (head, token slice), a panel of kPanel kv_b rows at a
// time, each panel serving every token of the slice. F32 rows are read in
// place, and so are BF16 rows for slices of up to kWidenOnceTokens tokens
// (decode: widened in registers); otherwise a panel is decoded into a
// per-thread buffer, so T tokens share one decode and no full dequantized
// copy of kv_b ever exists. BF16 panels ask for the next panel's lines as
// they are read: a decode step streams all of kv_b (16 heads x 448 rows x
// 512 on the mid model: 7 MiB a layer) once, from DRAM.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/attention/Mla.h"

#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/attention/Attend.h"
#include "runtime/cpu/attention/Parallel.h"
#include "runtime/cpu/attention/Vec.h"

#include <algorithm>

using namespace kiln::cpu;

namespace {

constexpr int64_t kChunk = 32;
constexpr int64_t kPanel = 32;

/// Per-thread scratch for steps 1 and 3.
struct PanelBuffers {
  float *rows;              // [kPanel, L] decoded kv_b rows
  const float **rowPtr;     // [kPanel]
  const uint16_t **rowBf16; // [kPanel], BF16 kv_b read in place
  const float **tokenIn;    // [kChunk]
  float **tokenOut;         // [kChunk]
};

struct Layout {
  float *qLat;    // [kChunk, H, L + Dr]
  float *oLat;    // [kChunk, H, L]
  uint8_t *panel; // [threads] x panelBytes
  size_t panelBytes;
  uint8_t *attend; // attendWorkspaceBytes
};

PanelBuffers carvePanel(Carver &c, int64_t latentDim) {
  PanelBuffers b;
  b.rows = c.take<float>(kPanel * latentDim);
  b.rowPtr = c.take<const float *>(kPanel);
  b.rowBf16 = c.take<const uint16_t *>(kPanel);
  b.tokenIn = c.take<const float *>(kChunk);
  b.tokenOut = c.take<float *>(kChunk);
  return b;
}

detail::AttendProblem latentProblem(const MlaArgs &a) {
  const MlaDims &d = a.dims;
  detail::AttendProblem p;
  p.keys = a.latent;
  p.keyDim = d.latentDim + d.ropeDim;
  p.valueDim = d.latentDim;
  p.valuesInKeyRows = true;
  p.scale = a.scale;
  p.qHeads = d.heads;
  p.kvHeads = 1;
  p.keyListWidth = a.topkWidth;
  return p;
}

Layout carve(Carver &c, const MlaArgs &a, int64_t tokens, int threads) {
  const MlaDims &d = a.dims;
  const int64_t chunk = std::min(tokens, kChunk);
  Layout l;
  l.qLat = c.take<float>(chunk * d.heads * (d.latentDim + d.ropeDim));
  l.oLat = c.take<float>(chunk * d.heads * d.latentDim);
  Carver measure;
  carvePanel(measure, d.latentDim);
  l.panelBytes = measure.used();
  l.panel = c.take<uint8_t>(int64_t(l.panelBytes) * threads);
  l.attend = c.take<uint8_t>(
      int64_t(detail::attendWorkspaceBytes(latentProblem(a), threads)));
  return l;
}

/// Tokens of a slice above which a BF16 panel is widened to floats once
/// (floatPanel) instead of at every read: each element is read by every
/// 4 tokens, and widening it costs half as much as the 4 multiply-adds.
/// Widening is exact, so either way gives the same bits.
constexpr int64_t kWidenOnceTokens = 8;

/// For BF16 kv_b and a slice of at most kWidenOnceTokens tokens: points
/// b.rowBf16 at rows [first, first + count), read in place (widened where
/// they are read), and returns it. Else null.
KILN_ATTN_INLINE const uint16_t *const *bf16Panel(const WeightView &w,
                                                  int64_t first, int64_t count,
                                                  int64_t tokens,
                                                  const PanelBuffers &b) {
  if (w.format != WeightFormat::BF16 || tokens > kWidenOnceTokens)
    return nullptr;
  for (int64_t i = 0; i < count; ++i)
    b.rowBf16[i] = static_cast<const uint16_t *>(w.data) + (first + i) * w.cols;
  return b.rowBf16;
}

/// Points b.rowPtr at kv_b rows [first, first + count) as floats: in place
/// for F32, else decoded into b.rows by dequantizeRow.
KILN_ATTN_INLINE const float *const *floatPanel(const WeightView &w,
                                                int64_t first, int64_t count,
                                                const PanelBuffers &b) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t row = first + i;
    if (w.format == WeightFormat::F32) {
      b.rowPtr[i] = static_cast<const float *>(w.data) + row * w.cols;
      continue;
    }
    float *dst = b.rows + i * w.cols;
    dequantizeRow(w, row, dst);
    b.rowPtr[i] = dst;
  }
  return b.rowPtr;
}

/// Step 1 for head h, chunk tokens [t0, t1): q_abs += q_nope[i] W_UK_h[i]
/// summed over i in order, panel by panel.
template <int W>
KILN_ATTN_INLINE void absorbQueryBody(const MlaArgs &a, int64_t base, int64_t h,
                                      int64_t t0, int64_t t1, const Layout &l,
                                      const PanelBuffers &b) {
  const MlaDims &d = a.dims;
  const int64_t width = d.latentDim + d.ropeDim;
  for (int64_t t = t0; t < t1; ++t) {
    float *q = l.qLat + (t * d.heads + h) * width;
    std::fill(q, q + d.latentDim, 0.0f);
    std::copy_n(a.qPe + ((base + t) * d.heads + h) * d.ropeDim, d.ropeDim,
                q + d.latentDim);
    b.tokenOut[t - t0] = q;
  }
  const float *qNope = a.qNope + ((base + t0) * d.heads + h) * d.nopeDim;
  const int64_t firstRow = h * (d.nopeDim + d.valueDim);
  for (int64_t i = 0; i < d.nopeDim; i += kPanel) {
    const int64_t rows = std::min(kPanel, d.nopeDim - i);
    // Spelled twice, not through a lambda: a lambda would not inherit this
    // function's target clones and would run the baseline ISA.
    const float *x = qNope + i;
    const int64_t ldx = d.heads * d.nopeDim;
    if (auto *w16 = bf16Panel(a.kvB, firstRow + i, rows, t1 - t0, b))
      vec::axpyGrid<W>(b.tokenOut, t1 - t0, x, ldx, w16, rows, d.latentDim,
                       kPanel * d.latentDim);
    else
      vec::axpyGrid<W>(b.tokenOut, t1 - t0, x, ldx,
                       floatPanel(a.kvB, firstRow + i, rows, b), rows,
                       d.latentDim);
  }
}
KILN_ATTN_PATHS(absorbQuery,
                (const MlaArgs &a, int64_t base, int64_t h, int64_t t0,
                 int64_t t1, const Layout &l, const PanelBuffers &b),
                (a, base, h, t0, t1, l, b))

/// Step 3 for head h, chunk tokens [t0, t1): out = W_UV_h o_lat.
template <int W>
KILN_ATTN_INLINE void expandOutputBody(const MlaArgs &a, int64_t base,
                                       int64_t h, int64_t t0, int64_t t1,
                                       const Layout &l, const PanelBuffers &b,
                                       float *out) {
  const MlaDims &d = a.dims;
  for (int64_t t = t0; t < t1; ++t)
    b.tokenIn[t - t0] = l.oLat + (t * d.heads + h) * d.latentDim;
  const int64_t firstRow = h * (d.nopeDim + d.valueDim) + d.nopeDim;
  for (int64_t i = 0; i < d.valueDim; i += kPanel) {
    const int64_t rows = std::min(kPanel, d.valueDim - i);
    float *y = out + ((base + t0) * d.heads + h) * d.valueDim + i;
    const int64_t ldy = d.heads * d.valueDim;
    if (auto *w16 = bf16Panel(a.kvB, firstRow + i, rows, t1 - t0, b))
      vec::dotGrid<W>(b.tokenIn, t1 - t0, w16, rows, d.latentDim, y, ldy,
                      kPanel * d.latentDim);
    else
      vec::dotGrid<W>(b.tokenIn, t1 - t0,
                      floatPanel(a.kvB, firstRow + i, rows, b), rows,
                      d.latentDim, y, ldy);
  }
}
KILN_ATTN_PATHS(expandOutput,
                (const MlaArgs &a, int64_t base, int64_t h, int64_t t0,
                 int64_t t1, const Layout &l, const PanelBuffers &b,
                 float *out),
                (a, base, h, t0, t1, l, b, out))

} // namespace

size_t kiln::cpu::mlaWorkspaceBytes(const MlaDims &dims, int64_t tokens,
                                    int threads) {
  MlaArgs a;
  a.dims = dims;
  Carver c;
  carve(c, a, tokens, std::max(1, threads));
  return c.used();
}

void kiln::cpu::mlaAttention(ThreadPool &pool, const MlaArgs &a, float *out,
                             Workspace &workspace) {
  if (a.tokens <= 0)
    return;
  const MlaDims &d = a.dims;
  const int threads = pool.size();
  Carver c(workspace.get(mlaWorkspaceBytes(d, a.tokens, threads)));
  const Layout l = carve(c, a, a.tokens, threads);
  auto panelOf = [&](int worker) {
    Carver pc(l.panel + size_t(worker) * l.panelBytes);
    return carvePanel(pc, d.latentDim);
  };
  // Token slices per head for steps 1 and 3: enough items for every thread.
  const int64_t slicesWanted =
      std::max<int64_t>(1, (4 * int64_t(threads) + d.heads - 1) / d.heads);

  for (int64_t base = 0; base < a.tokens; base += kChunk) {
    const int64_t n = std::min(kChunk, a.tokens - base);
    const int64_t slices = std::min(n, slicesWanted);
    const int64_t sliceLen = (n + slices - 1) / slices;
    auto sliceOf = [&](int64_t item, int64_t &h, int64_t &t0, int64_t &t1) {
      h = item / slices;
      t0 = std::min(n, (item % slices) * sliceLen);
      t1 = std::min(n, t0 + sliceLen);
    };

    detail::forEachItem(
        pool, d.heads * slices,
        [&](int64_t item, int w) {
          int64_t h, t0, t1;
          sliceOf(item, h, t0, t1);
          absorbQuery(a, base, h, t0, t1, l, panelOf(w));
        },
        /*itemCost=*/sliceLen * d.nopeDim * d.latentDim);

    detail::AttendProblem p = latentProblem(a);
    p.tokens = n;
    p.seqIds = a.seqIds + base;
    p.positions = a.positions + base;
    p.keyLists = a.topk ? a.topk + base * a.topkWidth : nullptr;
    p.q = l.qLat;
    p.out = l.oLat;
    detail::attend(pool, p, l.attend);

    detail::forEachItem(
        pool, d.heads * slices,
        [&](int64_t item, int w) {
          int64_t h, t0, t1;
          sliceOf(item, h, t0, t1);
          expandOutput(a, base, h, t0, t1, l, panelOf(w), out);
        },
        /*itemCost=*/sliceLen * d.latentDim * d.valueDim);
  }
}
