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

#include "runtime/cpu/CpuFeatures.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/MatmulBf16.h"
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
  uint16_t *pairs;          // bf16Products(): a panel packed in pairs
  uint16_t *coef;           // ... [kChunk, bf16RowLength(nopeDim)] q_nope
};

struct Layout {
  float *qLat;    // [kChunk, H, L + Dr]
  float *oLat;    // [kChunk, H, L]
  uint8_t *panel; // [threads] x panelBytes
  size_t panelBytes;
  uint8_t *attend; // attendWorkspaceBytes
};

/// Whether steps 1 and 3 multiply in BF16 (MatmulBf16.h): kv_b BF16, row
/// after row, under Bf16Activations::BF16.
bool bf16Products(const MlaArgs &a) {
  return usesBf16Dot(a.kvB) && a.kvB.panelRows == 1;
}

PanelBuffers carvePanel(Carver &c, const MlaArgs &a) {
  const MlaDims &d = a.dims;
  // Sized by the mode alone: mlaWorkspaceBytes() does not see kv_b.
  const int64_t bf16 = bf16Activations() == Bf16Activations::BF16 ? 1 : 0;
  PanelBuffers b;
  b.rows = c.take<float>(kPanel * d.latentDim);
  b.rowPtr = c.take<const float *>(kPanel);
  b.rowBf16 = c.take<const uint16_t *>(kPanel);
  b.tokenIn = c.take<const float *>(kChunk);
  b.tokenOut = c.take<float *>(kChunk);
  b.pairs = c.take<uint16_t>(bf16 * bf16Pairs(kPanel) * 2 * d.latentDim);
  b.coef = c.take<uint16_t>(bf16 * kChunk * bf16RowLength(d.nopeDim));
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
  p.bf16 = bf16Activations() == Bf16Activations::BF16;
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
  carvePanel(measure, a);
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

/// Step 1's start for head h, chunk tokens [t0, t1): q_lat = [0 | q_pe],
/// b.tokenOut pointing at each token's row.
KILN_ATTN_INLINE void startQueries(const MlaArgs &a, int64_t base, int64_t h,
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
}

/// Step 1 for head h, chunk tokens [t0, t1): q_abs += q_nope[i] W_UK_h[i]
/// summed over i in order, panel by panel.
template <int W>
KILN_ATTN_INLINE void absorbQueryBody(const MlaArgs &a, int64_t base, int64_t h,
                                      int64_t t0, int64_t t1, const Layout &l,
                                      const PanelBuffers &b) {
  const MlaDims &d = a.dims;
  startQueries(a, base, h, t0, t1, l, b);
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

/// Step 1 with BF16 products (bf16Products(a)): each token's q_nope
/// rounded once, each panel of W_UK_h rows packed in pairs as read, q_abs
/// summed in MatmulBf16.h's pair form (the terms in the same order).
void absorbQueryBf16(const MlaArgs &a, int64_t base, int64_t h, int64_t t0,
                     int64_t t1, const Layout &l, const PanelBuffers &b) {
  const MlaDims &d = a.dims;
  startQueries(a, base, h, t0, t1, l, b);
  const int64_t coefLength = bf16RowLength(d.nopeDim);
  for (int64_t t = t0; t < t1; ++t)
    roundRowBf16(a.qNope + ((base + t) * d.heads + h) * d.nopeDim, d.nopeDim,
                 b.coef + (t - t0) * coefLength);
  const auto *kvB = static_cast<const uint16_t *>(a.kvB.data);
  const int64_t firstRow = h * (d.nopeDim + d.valueDim);
  for (int64_t i = 0; i < d.nopeDim; i += kPanel) {
    const int64_t rows = std::min(kPanel, d.nopeDim - i);
    for (int64_t k = 0; k < rows; ++k)
      b.rowBf16[k] = kvB + (firstRow + i + k) * a.kvB.cols;
    // The next panel (the rows are contiguous) into L2 while this one is
    // packed and used: a decode step streams kv_b from DRAM once.
    const auto *next =
        reinterpret_cast<const char *>(b.rowBf16[0] + kPanel * a.kvB.cols);
    const int64_t nextRows = std::min(kPanel, d.nopeDim - i - kPanel);
    for (int64_t byte = 0; byte < nextRows * a.kvB.cols * 2; byte += 64)
      __builtin_prefetch(next + byte, 0, 2);
    packPairsBf16(b.rowBf16, rows, d.latentDim, b.pairs);
    axpyPairsBf16(b.tokenOut, t1 - t0, b.coef + i, coefLength, b.pairs,
                  bf16Pairs(rows), d.latentDim);
  }
}

/// Step 3 with BF16 products: out = W_UV_h o_lat as a BF16 matmul of the
/// head's kv_b rows (MatmulBf16.h), o_lat rounded inside the call.
void expandOutputBf16(const MlaArgs &a, int64_t base, int64_t h, int64_t t0,
                      int64_t t1, const Layout &l, float *out) {
  const MlaDims &d = a.dims;
  MatmulRows io;
  io.x = l.oLat + (t0 * d.heads + h) * d.latentDim;
  io.xStride = d.heads * d.latentDim;
  io.y = out + ((base + t0) * d.heads + h) * d.valueDim;
  io.yStride = d.heads * d.valueDim;
  io.tokens = t1 - t0;
  WeightView w = a.kvB; // W_UV_h alone
  w.data = static_cast<const uint16_t *>(a.kvB.data) +
           (h * (d.nopeDim + d.valueDim) + d.nopeDim) * a.kvB.cols;
  w.rows = d.valueDim;
  matmulRowsBf16(io, w, 0, d.valueDim);
}

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
  const bool bf16 = bf16Products(a);
  auto panelOf = [&](int worker) {
    Carver pc(l.panel + size_t(worker) * l.panelBytes);
    return carvePanel(pc, a);
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
          if (bf16)
            absorbQueryBf16(a, base, h, t0, t1, l, panelOf(w));
          else
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
          if (bf16)
            expandOutputBf16(a, base, h, t0, t1, l, out);
          else
            expandOutput(a, base, h, t0, t1, l, panelOf(w), out);
        },
        /*itemCost=*/sliceLen * d.latentDim * d.valueDim);
  }
}
