//===- MoeKernelTest.cpp - The GPU moe lowering, executed, vs the runtime -===//
//
// Builds a moe DispatchSpec (random weights: MXFP4 experts with their GPU
// layout, dense BF16, or FP8 block-128 with f32 block scales, the shared
// expert in the same format), lowers it with lowerMoeDispatch, runs every
// launch of the lowering in order through the CPU interpreter of the generated
// kernels (scratch buffers filled with NaN first) and compares the output
// with
//  (a) a reference that rounds the activations exactly as the kernels feed
//      them to the MFMAs (gfx950 MXFP4: Quark "even" MXFP4 blocks of x and
//      of the SwiGLU output; otherwise bf16), weights dequantized (FP8: q * s
//      in f32 rounded to bf16, as the kernels decode them), sums in
//      double: relative L2 error below 1e-5 (f32 sum order, sigmoid/exp2
//      ulps; a rounding-boundary flip of one activation would show); and
//      With FP8 activations (qa): E4M3FN per 1 x 128 block, scale amax /
//      448, weights q * s in f32, as Fp8Reference.h.
//  (b) cpu::moeForward on the raw f32 activations: relative L2 below 2e-2
//      with bf16 activations (FP8: also the bf16 rounding of q * s), 0.1
//      with FP8 activations (qa), 0.35
//      with gfx950's MXFP4 activations (W4A4: two MXFP4 roundings of the
//      activations, ~0.2 observed).
// A negative control routes without the score-correction bias; the
// comparison must then fail.
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/KernelInterpreter.h"

#include "test/unit/rocdl/Fp8Reference.h"

#include "passes/codegen/rocdl/MxWeightShuffle.h"
#include "passes/emit/GpuLaunch.h"
#include "passes/emit/Mxfp4Quantize.h"
#include "runtime/cpu/Arena.h"
#include "runtime/cpu/Dequant.h"
#include "runtime/cpu/Moe.h"
#include "runtime/cpu/Types.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>

using namespace kiln;
using namespace kiln::rocdl;
using namespace kiln::emit;
using interp::KernelArg;

namespace {

struct Case {
  Chip chip = Chip::Gfx950;
  bool mxfp4 = true;
  bool fp8 = false; // with mxfp4 = false: FP8 block-128 experts
  bool qa = false;  // with fp8: FP8 activations and MFMAs (--gpu-fp8-gemm=fp8)
  bool routerBf16 = false;
  int64_t experts = 8, hidden = 256, inter = 128, topk = 4;
  int64_t groups = 1, topkGroup = 1;
  bool shared = true;
  int64_t tokens = 33;
  bool decode = false;
  std::string name() const {
    std::ostringstream os;
    os << (chip == Chip::Gfx950 ? "gfx950" : "gfx942")
       << (mxfp4 ? "_mxfp4"
           : fp8 ? "_fp8"
                 : "_bf16")
       << "_h" << hidden << "_i" << inter << "_k" << topk << "_g" << groups
       << (shared ? "_shared" : "") << "_t" << tokens
       << (decode ? "_decode" : "_prefill") << (qa ? "_qa" : "");
    return os.str();
  }
};

/// One weight (matrix or stack) in every form the test needs.
struct TestWeight {
  int64_t count = 1, n = 0, k = 0;
  bool mx = false, fp8 = false;
  bool storedScales = true;            // FP8: the artifact has its scales
  std::vector<float> values;           // dequantized [count, n, k]
  std::vector<uint8_t> raw;            // CPU layout: bf16/f32 bytes, packed
                                       // MXFP4 or E4M3FN bytes
  std::vector<uint8_t> rawScales;      // MXFP4 E8M0 [count, n, k / 32]; FP8
                                       // f32 [count, n/128, k/128] rounded up
  std::vector<uint8_t> gpu, gpuScales; // MxWeightLayout per matrix
  cpu::WeightFormat format = cpu::WeightFormat::F32;

  cpu::WeightView view() const {
    cpu::WeightView v;
    v.format = format;
    v.data = raw.data();
    v.scales = mx || fp8 ? rawScales.data() : nullptr;
    v.rows = n;
    v.cols = k;
    v.count = count;
    v.dataStride = int64_t(raw.size()) / count;
    v.scaleStride = mx || fp8 ? int64_t(rawScales.size()) / count : 0;
    return v;
  }
  // The device binds the GPU copy for MXFP4, the stored bytes otherwise.
  std::vector<uint8_t> &deviceData() { return mx ? gpu : raw; }
  std::vector<uint8_t> &deviceScales() { return mx ? gpuScales : rawScales; }
};

TestWeight makeMx(int64_t count, int64_t n, int64_t k, std::mt19937 &rng) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-3, 1);
  TestWeight w;
  w.count = count;
  w.n = n;
  w.k = k;
  w.mx = true;
  w.format = cpu::WeightFormat::MXFP4;
  w.raw.resize(size_t(count * n * k / 2));
  w.rawScales.resize(size_t(count * n * k / 32));
  std::vector<float> row(static_cast<size_t>(k));
  for (int64_t r = 0; r < count * n; ++r) {
    for (int64_t b = 0; b < k / 32; ++b) {
      float s = std::ldexp(1.0f / std::sqrt(float(k)), binade(rng));
      for (int i = 0; i < 32; ++i)
        row[size_t(b * 32 + i)] = dist(rng) * s;
    }
    quantizeMxfp4Row(row.data(), k, Mxfp4ScaleRule::Even,
                     &w.raw[size_t(r * k / 2)],
                     &w.rawScales[size_t(r * k / 32)]);
  }
  w.values.resize(size_t(count * n * k));
  for (int64_t r = 0; r < count * n; ++r)
    for (int64_t c = 0; c < k; ++c) {
      uint8_t byte = w.raw[size_t(r * k / 2 + c / 2)];
      uint8_t code = (c % 2) ? byte >> 4 : byte & 0xF;
      w.values[size_t(r * k + c)] =
          cpu::e2m1ToFloat(code) *
          cpu::e8m0ToFloat(w.rawScales[size_t(r * k / 32 + c / 32)]);
    }
  for (int64_t e = 0; e < count; ++e) {
    ShuffledMxWeight s;
    std::string error;
    EXPECT_TRUE(shuffleMxfp4Weight(&w.raw[size_t(e * n * k / 2)],
                                   &w.rawScales[size_t(e * n * k / 32)], n, k,
                                   s, error))
        << error;
    w.gpu.insert(w.gpu.end(), s.data.begin(), s.data.end());
    w.gpuScales.insert(w.gpuScales.end(), s.scales.begin(), s.scales.end());
  }
  return w;
}

/// FP8 block-128 weights like a checkpoint's: codes near N(0, 32^2) (amax
/// near the E4M3 range) with one in 16 a uniformly random code of magnitude
/// at most 2 (subnormals and zeros included, no NaN), and per 128 x 128
/// block a scale of 2^[-2, 1] * U(0.75, 1.25) / (32 sqrt(k)). `values`
/// are q * s rounded to bf16 as the bf16 path decodes them, or with `exact`
/// (the FP8 MFMAs take the codes) q * s in f32.
TestWeight makeFp8(int64_t count, int64_t n, int64_t k, std::mt19937 &rng,
                   bool exact) {
  // Non-negative codes 0x00..0x7E by value, for rounding to nearest.
  std::vector<std::pair<float, uint8_t>> table;
  for (int c = 0; c < 0x7f; ++c)
    table.push_back({cpu::e4m3ToFloat(uint8_t(c)), uint8_t(c)});
  std::normal_distribution<float> dist(0.0f, 32.0f);
  std::uniform_int_distribution<int> small(0, 0x48), coin(0, 15), sign(0, 1),
      binade(-2, 1);
  std::uniform_real_distribution<float> jitter(0.75f, 1.25f);
  TestWeight w;
  w.count = count;
  w.n = n;
  w.k = k;
  w.fp8 = true;
  w.format = cpu::WeightFormat::FP8;
  w.raw.resize(size_t(count * n * k));
  for (uint8_t &q : w.raw) {
    int code;
    if (coin(rng) == 0) {
      code = small(rng);
    } else {
      float v = std::min(std::fabs(dist(rng)), 448.0f);
      auto it = std::lower_bound(table.begin(), table.end(), v,
                                 [](const std::pair<float, uint8_t> &e,
                                    float x) { return e.first < x; });
      if (it == table.end() ||
          (it != table.begin() && v - (it - 1)->first < it->first - v))
        --it;
      code = it->second;
    }
    q = uint8_t(code | (sign(rng) << 7));
  }
  int64_t nb = (n + 127) / 128, kb = (k + 127) / 128;
  std::vector<float> scales(size_t(count * nb * kb));
  for (float &sc : scales)
    sc = std::ldexp(jitter(rng), binade(rng)) / (32.0f * std::sqrt(float(k)));
  w.rawScales.resize(scales.size() * 4);
  std::memcpy(w.rawScales.data(), scales.data(), w.rawScales.size());
  w.values.resize(size_t(count * n * k));
  for (int64_t e = 0; e < count; ++e)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t c = 0; c < k; ++c) {
        size_t i = size_t((e * n + r) * k + c);
        float v = cpu::e4m3ToFloat(w.raw[i]) *
                  scales[size_t((e * nb + r / 128) * kb + c / 128)];
        w.values[i] = exact ? v : cpu::bf16ToFloat(cpu::floatToBf16(v));
      }
  return w;
}

TestWeight makeDense(int64_t count, int64_t n, int64_t k, bool bf16,
                     std::mt19937 &rng, float sigma) {
  std::normal_distribution<float> dist(0.0f, sigma);
  TestWeight w;
  w.count = count;
  w.n = n;
  w.k = k;
  w.format = bf16 ? cpu::WeightFormat::BF16 : cpu::WeightFormat::F32;
  w.values.resize(size_t(count * n * k));
  w.raw.resize(w.values.size() * (bf16 ? 2 : 4));
  for (size_t i = 0; i < w.values.size(); ++i) {
    float v = dist(rng);
    if (bf16) {
      uint16_t h = cpu::floatToBf16(v);
      v = cpu::bf16ToFloat(h);
      std::memcpy(&w.raw[i * 2], &h, 2);
    } else {
      std::memcpy(&w.raw[i * 4], &v, 4);
    }
    w.values[i] = v;
  }
  return w;
}

/// The whole dispatch: weights, program, plan, and the CPU views.
struct MoeFixture {
  Case cs;
  std::vector<float> x;
  TestWeight router, gate, up, down, sharedGate, sharedUp, sharedDown;
  std::vector<float> bias;
  float scale = 2.5f;
  /// Expert parallelism: the stacks hold experts expertOffset, ... of the
  /// router's cs.experts.
  int64_t expertOffset = 0;

  explicit MoeFixture(const Case &c) : cs(c) {
    std::mt19937 rng(1234 + uint32_t(c.hidden * 7 + c.inter + c.topk));
    int64_t e = c.experts, h = c.hidden, in = c.inter;
    router = makeDense(1, e, h, c.routerBf16, rng, 1.0f / std::sqrt(float(h)));
    std::uniform_real_distribution<float> b(-0.5f, 0.5f);
    for (int64_t i = 0; i < e; ++i)
      bias.push_back(b(rng));
    auto expert = [&](int64_t count, int64_t n, int64_t k) {
      if (c.mxfp4)
        return makeMx(count, n, k, rng);
      if (c.fp8)
        return makeFp8(count, n, k, rng, c.qa);
      return makeDense(count, n, k, true, rng, 1.0f / std::sqrt(float(k)));
    };
    gate = expert(e, in, h);
    up = expert(e, in, h);
    down = expert(e, h, in);
    if (c.shared) {
      sharedGate = expert(1, in, h);
      sharedUp = expert(1, in, h);
      sharedDown = expert(1, h, in);
    }
    std::normal_distribution<float> dist(0.0f, 1.0f);
    x.resize(size_t(c.tokens * h));
    for (float &v : x)
      v = dist(rng);
  }

  cpu::MoeWeights cpuWeights(const std::vector<float> &useBias) const {
    cpu::MoeWeights w;
    w.router = router.view();
    w.bias = useBias.data();
    w.gate = gate.view();
    w.up = up.view();
    w.down = down.view();
    if (cs.shared) {
      w.sharedGate = sharedGate.view();
      w.sharedUp = sharedUp.view();
      w.sharedDown = sharedDown.view();
    }
    return w;
  }
  cpu::MoeParams params() const {
    cpu::MoeParams p;
    p.numExperts = cs.experts;
    p.topK = cs.topk;
    p.nGroup = cs.groups;
    p.topkGroup = cs.topkGroup;
    p.normTopkProb = true;
    p.routedScalingFactor = scale;
    p.blockSize = 64;
    return p;
  }

  std::vector<float> cpuForward(const std::vector<float> &useBias) const {
    cpu::ThreadPool pool(1);
    cpu::Arena arena;
    std::vector<float> y(x.size());
    cpu::moeForward(pool, x.data(), cs.tokens, cpuWeights(useBias), params(),
                    arena, y.data());
    return y;
  }

  /// Activations as the kernels feed them to the MFMAs.
  std::vector<float> roundActivations(const std::vector<float> &a,
                                      int64_t k) const {
    std::vector<float> out(a.size());
    if (cs.mxfp4 && cs.chip == Chip::Gfx950) {
      std::vector<uint8_t> packed(size_t(k / 2)), scales(size_t(k / 32));
      for (size_t r = 0; r < a.size() / size_t(k); ++r) {
        quantizeMxfp4Row(&a[r * size_t(k)], k, Mxfp4ScaleRule::Even,
                         packed.data(), scales.data());
        for (int64_t i = 0; i < k; ++i) {
          uint8_t byte = packed[size_t(i / 2)];
          uint8_t code = (i % 2) ? byte >> 4 : byte & 0xF;
          out[r * size_t(k) + size_t(i)] =
              cpu::e2m1ToFloat(code) * cpu::e8m0ToFloat(scales[size_t(i / 32)]);
        }
      }
      return out;
    }
    if (cs.qa) {
      // E4M3FN per 1 x 128 block, scale amax / 448 (Fp8Reference.h).
      for (size_t r = 0; r < a.size() / size_t(k); ++r)
        for (int64_t k0 = 0; k0 < k; k0 += 128) {
          const float *x = &a[r * size_t(k) + size_t(k0)];
          int64_t len = std::min<int64_t>(128, k - k0);
          float amax = 0.0f;
          for (int64_t i = 0; i < len; ++i)
            amax = std::max(amax, std::fabs(x[i]));
          float inv = amax > 0.0f ? 448.0f / amax : 0.0f;
          for (int64_t i = 0; i < len; ++i)
            out[r * size_t(k) + size_t(k0 + i)] =
                float(fp8ref::e4m3Value(fp8ref::e4m3Round(x[i] * inv)) *
                      (amax / 448.0f));
        }
      return out;
    }
    for (size_t i = 0; i < a.size(); ++i)
      out[i] = cpu::bf16ToFloat(cpu::floatToBf16(a[i]));
    return out;
  }

  /// y[n] = sum_k W[matrix][n][k] * a[k] in double.
  static std::vector<float> gemv(const TestWeight &w, int64_t matrix,
                                 const float *a) {
    std::vector<float> y(size_t(w.n));
    for (int64_t r = 0; r < w.n; ++r) {
      double s = 0;
      const float *row = &w.values[size_t((matrix * w.n + r) * w.k)];
      for (int64_t i = 0; i < w.k; ++i)
        s += double(row[i]) * a[i];
      y[size_t(r)] = float(s);
    }
    return y;
  }

  /// The experts on the kernels' rounded activations, CPU routing.
  std::vector<float> kernelReference(const std::vector<float> &useBias) const {
    int64_t t = cs.tokens, k = cs.topk, h = cs.hidden;
    std::vector<int32_t> ids(size_t(t * k));
    std::vector<float> w(size_t(t * k));
    cpu::ThreadPool pool(1);
    cpu::Arena arena;
    cpu::route(pool, x.data(), t, router.view(), useBias.data(), params(),
               arena, ids.data(), w.data());
    std::vector<float> xq = roundActivations(x, h);
    std::vector<float> y(x.size(), 0.0f);
    auto expert = [&](const TestWeight &g, const TestWeight &u,
                      const TestWeight &d, int64_t e, const float *a) {
      std::vector<float> gv = gemv(g, e, a), uv = gemv(u, e, a);
      std::vector<float> act(gv.size());
      for (size_t i = 0; i < gv.size(); ++i)
        act[i] = gv[i] / (1.0f + std::exp(-gv[i])) * uv[i];
      act = roundActivations(act, int64_t(act.size()));
      return gemv(d, e, act.data());
    };
    for (int64_t tok = 0; tok < t; ++tok) {
      const float *a = &xq[size_t(tok * h)];
      float *out = &y[size_t(tok * h)];
      if (cs.shared) {
        std::vector<float> s = expert(sharedGate, sharedUp, sharedDown, 0, a);
        for (int64_t i = 0; i < h; ++i)
          out[i] += s[size_t(i)];
      }
      for (int64_t j = 0; j < k; ++j) {
        std::vector<float> d =
            expert(gate, up, down, ids[size_t(tok * k + j)], a);
        for (int64_t i = 0; i < h; ++i)
          out[i] += w[size_t(tok * k + j)] * d[size_t(i)];
      }
    }
    return y;
  }
};

StoredForm stored(const TestWeight &w) {
  StoredForm s;
  if (w.mx) {
    s.layout = fb::WeightLayout::Mxfp4;
    s.dtype = fb::DType::F4E2M1;
    s.scales = true;
    s.gpuCopy = true;
  } else if (w.fp8) {
    s.layout = fb::WeightLayout::Fp8Block128;
    s.dtype = fb::DType::F8E4M3;
    s.scales = w.storedScales;
  } else {
    s.layout = fb::WeightLayout::Dense;
    s.dtype =
        w.format == cpu::WeightFormat::BF16 ? fb::DType::BF16 : fb::DType::F32;
  }
  return s;
}

WeightSpec weightSpec(const TestWeight &w, bool stack) {
  WeightSpec s;
  s.shape = stack ? std::vector<int64_t>{w.count, w.n, w.k}
                  : std::vector<int64_t>{w.n, w.k};
  s.experts = stack ? w.count : 0;
  return s;
}

/// Lowers the fixture's dispatch and runs the launches; "" or the error.
std::string runGpu(MoeFixture &f, std::vector<float> &out,
                   GpuDispatchLowering *loweringOut = nullptr) {
  const Case &c = f.cs;
  ProgramSpec program;
  std::vector<StoredForm> weights;
  std::vector<TestWeight *> byIndex = {&f.router, nullptr, &f.gate, &f.up,
                                       &f.down};
  if (c.shared)
    byIndex.insert(byIndex.end(), {&f.sharedGate, &f.sharedUp, &f.sharedDown});
  for (size_t i = 0; i < byIndex.size(); ++i) {
    if (!byIndex[i]) { // the bias, 1-D
      WeightSpec b;
      b.shape = {c.experts};
      program.weights.push_back(b);
      StoredForm s;
      s.dtype = fb::DType::F32;
      weights.push_back(s);
      continue;
    }
    program.weights.push_back(weightSpec(*byIndex[i], i >= 2 && i <= 4));
    weights.push_back(stored(*byIndex[i]));
  }
  PlanSpec plan;
  plan.name = c.decode ? "decode" : "prefill";
  plan.buffers = {
      BufferSpec{"x", kiln::abi::RowsKind::Tokens, false, {c.hidden}},
      BufferSpec{"out", kiln::abi::RowsKind::Tokens, false, {c.hidden}}};
  DispatchSpec d;
  d.kernel = kiln::abi::Kernel::Moe;
  d.args = {{ArgKind::Buffer, 0}, {ArgKind::Weight, 0}, {ArgKind::Weight, 1},
            {ArgKind::Weight, 2}, {ArgKind::Weight, 3}, {ArgKind::Weight, 4}};
  for (uint32_t i = 0; i < 3; ++i)
    d.args.push_back(c.shared ? ArgSpec{ArgKind::Weight, 5 + i}
                              : ArgSpec{ArgKind::None, 0});
  d.args.push_back({ArgKind::Buffer, 1});
  kiln::abi::MoeParams params;
  params.expertOffset = f.expertOffset;
  params.topK = c.topk;
  params.nGroup = c.groups;
  params.topkGroup = c.topkGroup;
  params.normTopkProb = true;
  params.blockSize = 64;
  params.scale = f.scale;
  d.params = params;
  plan.dispatches = {d};
  GpuDispatchContext context{plan, plan.dispatches[0], program, weights, false,
                             c.qa};
  std::optional<GpuDispatchLowering> lowering = lowerGpuDispatch(context);
  if (!lowering)
    return "no GPU lowering";
  if (loweringOut)
    *loweringOut = *lowering;

  int64_t rows = c.tokens;
  std::vector<std::vector<uint8_t>> scratch;
  for (const GpuScratchSpec &s : lowering->scratch) {
    std::vector<uint8_t> buf(size_t(s.perRow * rows + s.fixed), 0xFF);
    scratch.push_back(std::move(buf));
  }
  out.assign(size_t(rows * c.hidden), std::nanf(""));
  std::vector<float> biasValues = f.bias;
  auto data = [&](uint32_t i) -> KernelArg {
    switch (i) {
    case 0:
      return KernelArg::of(f.x);
    case 1:
      return KernelArg::of(f.router.raw);
    case 2:
      return KernelArg::of(biasValues);
    case 9:
      return KernelArg::of(out);
    default:
      return KernelArg::of(byIndex[i - 1]->deviceData());
    }
  };
  for (const GpuLaunchSpec &l : lowering->launches) {
    KernelSpec spec = l.spec;
    spec.chip = c.chip;
    std::array<int64_t, 3> grid;
    for (int a = 0; a < 3; ++a)
      grid[size_t(a)] = l.grid[size_t(a)].evaluate(rows);
    if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0)
      continue;
    std::vector<KernelArg> args;
    for (const GpuArgRef &a : l.args) {
      switch (a.part) {
      case GpuArgRef::Part::Data:
        args.push_back(data(a.index));
        break;
      case GpuArgRef::Part::Scales:
        args.push_back(KernelArg::of(byIndex[a.index - 1]->deviceScales()));
        break;
      case GpuArgRef::Part::Scratch:
        args.push_back(KernelArg::of(scratch[a.index]));
        break;
      case GpuArgRef::Part::Rows:
        args.push_back(KernelArg::i32(int32_t(rows)));
        break;
      default:
        return "unexpected argument part";
      }
    }
    std::string error = interp::runKernel(spec, grid, args);
    if (!error.empty())
      return spec.symbol() + ": " + error;
  }
  return "";
}

double relativeL2(const std::vector<float> &y, const std::vector<float> &ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double diff = std::isfinite(y[i]) ? double(y[i]) - ref[i] : 1e30;
    num += diff * diff;
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / den);
}

void report(const std::string &what, double value) {
  ::testing::Test::RecordProperty(what, std::to_string(value));
  std::cout << "[ metric   ] " << what << " = " << value << "\n";
}

class MoeLowering : public ::testing::TestWithParam<Case> {};

TEST_P(MoeLowering, MatchesCpu) {
  const Case &c = GetParam();
  MoeFixture f(c);
  std::vector<float> y;
  GpuDispatchLowering lowering;
  ASSERT_EQ(runGpu(f, y, &lowering), "");
  // route, align, gate_up, down, [4 shared launches], combine.
  EXPECT_EQ(lowering.launches.size(), c.shared ? 9u : 5u);

  double kernelErr = relativeL2(y, f.kernelReference(f.bias));
  double cpuErr = relativeL2(y, f.cpuForward(f.bias));
  report(c.name() + ".vs_rounded_reference", kernelErr);
  report(c.name() + ".vs_moeForward", cpuErr);
  EXPECT_LT(kernelErr, 1e-5);
  bool w4a4 = c.mxfp4 && c.chip == Chip::Gfx950;
  double cpuTol = w4a4 ? 0.35 : c.qa ? 0.1 : 2e-2;
  EXPECT_LT(cpuErr, cpuTol);

  // Negative control: routing that ignores the bias must fail both
  // comparisons.
  std::vector<float> noBias(size_t(c.experts), 0.0f);
  double wrong = relativeL2(y, f.kernelReference(noBias));
  double wrongCpu = relativeL2(y, f.cpuForward(noBias));
  report(c.name() + ".vs_unbiased_routing", wrong);
  EXPECT_GT(wrong, 1e-5);
  EXPECT_GT(wrongCpu, cpuTol);
}

Case make(Chip chip, bool mx, bool routerBf16, int64_t h, int64_t in,
          int64_t topk, int64_t groups, bool shared, int64_t tokens,
          bool decode) {
  Case c;
  c.chip = chip;
  c.mxfp4 = mx;
  c.routerBf16 = routerBf16;
  c.hidden = h;
  c.inter = in;
  c.topk = topk;
  c.groups = groups;
  c.topkGroup = groups > 1 ? 2 : 1;
  c.shared = shared;
  c.tokens = tokens;
  c.decode = decode;
  return c;
}

Case fp8(Case c) {
  c.fp8 = true;
  return c;
}

Case fp8Activations(Case c) {
  c = fp8(c);
  c.qa = true;
  return c;
}

/// Experts [first, first + count) of a dense (BF16) stack.
TestWeight expertSlice(const TestWeight &w, int64_t first, int64_t count) {
  TestWeight s = w;
  s.count = count;
  size_t values = size_t(w.n * w.k), bytes = w.raw.size() / size_t(w.count);
  s.values.assign(w.values.begin() + long(first * values),
                  w.values.begin() + long((first + count) * values));
  s.raw.assign(w.raw.begin() + long(size_t(first) * bytes),
               w.raw.begin() + long(size_t(first + count) * bytes));
  return s;
}

/// Rank `rank` of `ranks` under expert parallelism: its share of the routed
/// experts, the shared expert on rank 0 only (as kiln-compile --ep splits).
MoeFixture epRank(const MoeFixture &whole, int64_t rank, int64_t ranks) {
  MoeFixture part = whole;
  int64_t count = whole.cs.experts / ranks;
  part.expertOffset = rank * count;
  part.gate = expertSlice(whole.gate, part.expertOffset, count);
  part.up = expertSlice(whole.up, part.expertOffset, count);
  part.down = expertSlice(whole.down, part.expertOffset, count);
  part.cs.shared = whole.cs.shared && rank == 0;
  return part;
}

// Expert parallelism over two ranks: each rank's lowering (the router's 8
// experts, a stack of 4 from expert_offset, the shared expert on rank 0)
// routes every token over all experts, keeps the pairs of its own and skips
// the others; the two outputs added are the single rank's within float
// rounding and the CPU's moeForward within the kernels' bf16 tolerance.
// Then a bias that routes every token to rank 0's experts: rank 1's output
// is exactly zero (every pair skipped, no shared expert) and rank 0's is the
// whole.
TEST(MoeLoweringEp, TwoRanksAddUpToTheWhole) {
  Case c = make(Chip::Gfx950, false, false, 128, 64, 2, 1, true, 9, false);
  MoeFixture whole(c);
  for (bool oneRank : {false, true}) {
    if (oneRank)
      for (int64_t e = 0; e < c.experts; ++e)
        whole.bias[size_t(e)] = e < c.experts / 2 ? 4.0f : -4.0f;
    std::vector<float> single, sum(size_t(c.tokens * c.hidden), 0.0f);
    ASSERT_EQ(runGpu(whole, single), "");
    std::vector<std::vector<float>> outs(2);
    for (int64_t r = 0; r < 2; ++r) {
      MoeFixture part = epRank(whole, r, 2);
      GpuDispatchLowering lowering;
      ASSERT_EQ(runGpu(part, outs[size_t(r)], &lowering), "") << "rank " << r;
      EXPECT_NE(lowering.launches[0].spec.symbol().find("_el4"),
                std::string::npos)
          << lowering.launches[0].spec.symbol();
      for (size_t i = 0; i < sum.size(); ++i)
        sum[i] += outs[size_t(r)][i];
    }
    double vsSingle = relativeL2(sum, single);
    double vsCpu = relativeL2(sum, whole.cpuForward(whole.bias));
    report(std::string(oneRank ? "one_rank" : "both_ranks") + ".vs_single",
           vsSingle);
    EXPECT_LT(vsSingle, 1e-5);
    EXPECT_LT(vsCpu, 2e-2);
    if (oneRank) {
      for (float v : outs[1])
        ASSERT_EQ(v, 0.0f);
      EXPECT_EQ(outs[0], single);
    } else {
      // Each rank's share matters: rank 1 alone is far from the whole.
      EXPECT_GT(relativeL2(outs[1], single), 0.1);
    }
  }
}

// FP8 block scales matter: the same weights with gate's scales reversed
// (experts and blocks exchanged) must miss the reference; an FP8 stack
// stored without scales gets no GPU lowering (nor, then, a CPU-layout
// fallback: the dispatch stays on the CPU).
// moe_align alone through the interpreter against cpu::alignBlocks, entry
// for entry: every expert's pairs in ascending order (a stable counting sort
// over per-thread segments), padding, block experts and the block count.
// Shapes: one segment (few pairs), many, the 256-segment cap with uneven
// segments, more experts than threads, ids of another rank's experts (< 0,
// skipped), and every pair routed to one expert.
struct AlignCase {
  int64_t experts, topk, rows, bm;
  int pattern; // 0 random, 1 some ids < 0, 2 all to expert E - 1
};

TEST(MoeAlign, MatchesTheCpuOrder) {
  std::mt19937 rng(7);
  for (const AlignCase &a : std::vector<AlignCase>{{8, 4, 1, 16},
                                                   {8, 4, 33, 32},
                                                   {256, 8, 64, 16},
                                                   {256, 8, 1100, 32},
                                                   {300, 6, 250, 16},
                                                   {64, 8, 97, 32},
                                                   {16, 4, 200, 16},
                                                   {256, 8, 40, 32}}) {
    for (int pattern : {0, 1, 2}) {
      const int64_t pairs = a.rows * a.topk;
      std::vector<int32_t> ids(static_cast<size_t>(pairs));
      std::uniform_int_distribution<int32_t> pick(0, int32_t(a.experts - 1));
      for (int32_t &id : ids)
        id = pattern == 2 ? int32_t(a.experts - 1) : pick(rng);
      if (pattern == 1)
        for (size_t i = 0; i < ids.size(); i += 3)
          ids[i] = -1;
      std::string what =
          "E " + std::to_string(a.experts) + " topk " + std::to_string(a.topk) +
          " rows " + std::to_string(a.rows) + " bm " + std::to_string(a.bm) +
          " pattern " + std::to_string(pattern);

      cpu::Arena arena;
      cpu::MoeParams params;
      params.numExperts = a.experts;
      params.topK = a.topk;
      params.blockSize = a.bm;
      cpu::MoeBlocks want = cpu::alignBlocks(ids.data(), a.rows, params, arena);

      MoeAlignParams p;
      p.e = a.experts;
      p.topk = a.topk;
      p.bm = a.bm;
      const size_t room = size_t(pairs + a.experts * a.bm);
      std::vector<int32_t> sorted(room, -7), blockExpert(room, -7), meta(4, -7),
          counts(size_t(a.experts * kRowBlock), -7);
      std::string error = interp::runKernel(
          makeSpec(p), {1, 1, 1},
          {KernelArg::of(ids), KernelArg::i32(int32_t(a.rows)),
           KernelArg::of(sorted), KernelArg::of(blockExpert),
           KernelArg::of(meta), KernelArg::of(counts)});
      ASSERT_EQ(error, "") << what;
      ASSERT_EQ(meta[0], int32_t(want.numBlocks)) << what;
      for (int64_t i = 0; i < want.numPadded; ++i)
        ASSERT_EQ(sorted[size_t(i)], want.sortedIds[i])
            << what << " sorted[" << i << "]";
      for (int64_t i = 0; i < want.numBlocks; ++i)
        ASSERT_EQ(blockExpert[size_t(i)], want.blockExpert[i])
            << what << " blockExpert[" << i << "]";
    }
  }
}

TEST(MoeLoweringFp8, WrongScalesFail) {
  for (Chip chip : {Chip::Gfx950, Chip::Gfx942}) {
    Case c = fp8(make(chip, false, false, 256, 160, 2, 1, true, 5, false));
    MoeFixture f(c);
    std::vector<float> ref = f.kernelReference(f.bias);
    std::vector<float> y;
    ASSERT_EQ(runGpu(f, y), "");
    double ok = relativeL2(y, ref);
    std::vector<float> scales(f.gate.rawScales.size() / 4);
    std::memcpy(scales.data(), f.gate.rawScales.data(), scales.size() * 4);
    std::reverse(scales.begin(), scales.end());
    std::memcpy(f.gate.rawScales.data(), scales.data(), scales.size() * 4);
    ASSERT_EQ(runGpu(f, y), "");
    double wrong = relativeL2(y, ref);
    report(c.name() + ".reversed_gate_scales", wrong);
    EXPECT_LT(ok, 1e-5);
    EXPECT_GT(wrong, 2e-2);
  }
}

TEST(MoeLoweringFp8, NoScalesNoLowering) {
  Case c =
      fp8(make(Chip::Gfx950, false, false, 128, 64, 2, 1, false, 5, false));
  MoeFixture f(c);
  f.down.storedScales = false;
  std::vector<float> y;
  EXPECT_EQ(runGpu(f, y), "no GPU lowering");
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeLowering,
    ::testing::Values(
        // MXFP4 experts, gfx950 recipe (in-kernel MXFP4 activations).
        make(Chip::Gfx950, true, false, 256, 128, 4, 4, true, 33, false),
        make(Chip::Gfx950, true, true, 192, 96, 2, 1, false, 5, true),
        make(Chip::Gfx950, true, false, 64, 64, 1, 1, true, 1, true),
        // MXFP4 experts, gfx942 recipe (bf16 dequantization).
        make(Chip::Gfx942, true, true, 256, 128, 4, 4, true, 33, false),
        make(Chip::Gfx942, true, false, 160, 96, 3, 1, false, 5, true),
        // Dense BF16 experts.
        make(Chip::Gfx950, false, true, 128, 64, 3, 1, true, 1, true),
        make(Chip::Gfx950, false, false, 96, 64, 2, 4, false, 33, false),
        make(Chip::Gfx942, false, true, 160, 96, 1, 4, true, 33, false),
        make(Chip::Gfx942, false, true, 64, 128, 4, 1, false, 5, true),
        // FP8 block-128 experts (and shared expert): T = 1, 5, 33, top_k
        // 1..4 on each chip; K and N not multiples of 128 give partial
        // scale blocks.
        fp8(make(Chip::Gfx950, false, false, 256, 128, 4, 4, true, 33, false)),
        fp8(make(Chip::Gfx950, false, true, 160, 96, 1, 1, false, 5, true)),
        fp8(make(Chip::Gfx950, false, false, 128, 64, 3, 1, true, 1, true)),
        fp8(make(Chip::Gfx950, false, true, 384, 160, 2, 1, false, 33, false)),
        fp8(make(Chip::Gfx942, false, true, 256, 128, 2, 1, false, 33, false)),
        fp8(make(Chip::Gfx942, false, false, 160, 96, 4, 4, true, 5, true)),
        fp8(make(Chip::Gfx942, false, true, 64, 128, 1, 1, true, 1, true)),
        fp8(make(Chip::Gfx942, false, false, 96, 288, 3, 1, true, 33, false)),
        // The same with FP8 activations and MFMAs (qa = 1): K of 96, 160,
        // 288 and 384 (partial 128-K blocks), decode and prefill tilings.
        fp8Activations(make(Chip::Gfx950, false, false, 256, 128, 4, 4, true,
                            33, false)),
        fp8Activations(make(Chip::Gfx950, false, true, 160, 96, 1, 1, false, 5,
                            true)),
        fp8Activations(make(Chip::Gfx950, false, true, 384, 160, 2, 1, false,
                            33, false)),
        fp8Activations(make(Chip::Gfx942, false, false, 160, 96, 4, 4, true, 5,
                            true)),
        fp8Activations(make(Chip::Gfx942, false, false, 96, 288, 3, 1, true, 33,
                            false)),
        fp8Activations(make(Chip::Gfx942, false, true, 64, 128, 1, 1, true, 1,
                            true))),
    [](const ::testing::TestParamInfo<Case> &info) {
      return info.param.name();
    });

} // namespace
