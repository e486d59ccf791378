//===- GemmEmulator.cpp ---------------------------------------------------===//

#include "test/unit/rocdl/GemmEmulator.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace kiln::rocdl;
using namespace kiln::rocdl::emu;

namespace {

float bitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t floatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

/// E2M1 code to its value (AMDGPU.md section 1 table).
double e2m1Value(uint8_t code) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  double v = kMag[code & 7];
  return (code & 8) ? -v : v;
}
double e8m0Value(uint8_t e) {
  return e == 0xFF ? std::numeric_limits<double>::quiet_NaN()
                   : std::ldexp(1.0, int(e) - 127);
}
uint8_t nibble(const LaneBytes &bytes, int i) {
  uint8_t byte = bytes[size_t(i / 2)];
  return (i % 2) ? byte >> 4 : byte & 0xF;
}
double bf16Value(uint16_t v) { return bitsToFloat(uint32_t(v) << 16); }

/// Round to nearest even; the LLVM fptrunc the gfx942 kernel uses.
uint16_t toBf16(float f) {
  uint32_t bits = floatToBits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t(bits >> 16);
}

/// Adds the 16x16 products `d` to the accumulators in the C layout.
void accumulate(const double d[16][16], WaveAcc &c) {
  for (int l = 0; l < kWaveSize; ++l)
    for (int r = 0; r < 4; ++r)
      c[size_t(l)][size_t(r)] =
          float(double(c[size_t(l)][size_t(r)]) + d[4 * (l / 16) + r][l % 16]);
}

} // namespace

void kiln::rocdl::emu::mfmaScale16x16x128Fp4(const LaneBytes a[kWaveSize],
                                             const LaneBytes b[kWaveSize],
                                             const uint32_t scaleA[kWaveSize],
                                             int opselA,
                                             const uint32_t scaleB[kWaveSize],
                                             int opselB, WaveAcc &c) {
  double d[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double sum = 0;
      for (int k = 0; k < 128; ++k) {
        int la = i + 16 * (k / 32), lb = j + 16 * (k / 32);
        double sa = e8m0Value(uint8_t(scaleA[la] >> (8 * opselA)));
        double sb = e8m0Value(uint8_t(scaleB[lb] >> (8 * opselB)));
        sum += sa * e2m1Value(nibble(a[la], k % 32)) * sb *
               e2m1Value(nibble(b[lb], k % 32));
      }
      d[i][j] = sum;
    }
  accumulate(d, c);
}

void kiln::rocdl::emu::mfmaBf16(int width, const LaneBf16 a[kWaveSize],
                                const LaneBf16 b[kWaveSize], WaveAcc &c) {
  double d[16][16];
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      double sum = 0;
      for (int k = 0; k < 4 * width; ++k) {
        int la = i + 16 * (k / width), lb = j + 16 * (k / width);
        sum += bf16Value(a[la][size_t(k % width)]) *
               bf16Value(b[lb][size_t(k % width)]);
      }
      d[i][j] = sum;
    }
  accumulate(d, c);
}

uint8_t kiln::rocdl::emu::cvtScaleF32ToFp4(float x, uint8_t scaleExponent) {
  // Division by a power of two is exact (ldexp), then the nearest of the
  // eight magnitudes; on a tie the even code (lowest mantissa bit 0).
  float scaled = std::ldexp(x, 127 - int(scaleExponent));
  uint8_t sign = std::signbit(scaled) ? 8 : 0;
  float mag = std::fabs(scaled);
  static const float kMag[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  uint8_t best = 7;
  if (!(mag >= 6.0f)) {
    best = 0;
    for (uint8_t code = 1; code < 8; ++code) {
      float dNew = std::fabs(mag - kMag[code]),
            dOld = std::fabs(mag - kMag[best]);
      if (dNew < dOld || (dNew == dOld && (code & 1) == 0))
        best = code;
    }
  }
  return uint8_t(sign | best);
}

uint8_t kiln::rocdl::emu::quantizeLaneBlock(const float values[32],
                                            LaneBytes &packed) {
  // amax with maxnum (NaN ignored), then Quark "even": round to E2M1
  // precision, floor(log2) - 2, biased and clamped to [0, 254].
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i)
    amax = std::fmax(amax, std::fabs(values[i]));
  uint32_t bits = floatToBits(amax) + 0x200000u;
  int biased = int((bits & 0x7F800000u) >> 23);
  uint8_t e = uint8_t(std::clamp(biased - 2, 0, 254));
  for (int i = 0; i < 32; i += 2)
    packed[size_t(i / 2)] = uint8_t(cvtScaleF32ToFp4(values[i], e) |
                                    (cvtScaleF32ToFp4(values[i + 1], e) << 4));
  return e;
}

uint16_t kiln::rocdl::emu::dequantizeFp4ToBf16(uint8_t code,
                                               uint8_t scaleExponent) {
  uint32_t bits = (uint32_t(code & 8) << 28) | (uint32_t(code & 7) << 22);
  float f = std::ldexp(bitsToFloat(bits), int(scaleExponent) - 1);
  return uint16_t(floatToBits(f) >> 16);
}

//===----------------------------------------------------------------------===//
// The mx_gemm program (GemmKernels.cpp, struct MxGemm)
//===----------------------------------------------------------------------===//

namespace {

struct LaneBlock {
  LaneBytes fp4{};    // gfx950
  uint32_t scale = 0; // gfx950: E8M0 in byte 0
  LaneBf16 bf16[4]{}; // gfx942: elements [4j, 4j + 4) in bf16[j/2][4*(j%2)..]
};

/// MxGemm::activationBlock for every lane of one M tile.
void activationBlocks(const KernelSpec &spec, const float *x,
                      const int64_t rows[kWaveSize], int64_t kStep,
                      LaneBlock out[kWaveSize]) {
  for (int64_t lane = 0; lane < kWaveSize; ++lane) {
    int64_t kElem = mxLaneK(kStep, lane);
    bool valid = true;
    if (spec.k % kMxStepK != 0) {
      valid = kElem < spec.k;
      kElem = std::min(kElem, spec.k - kMxLaneK);
    }
    float v[32];
    for (int i = 0; i < 32; ++i)
      v[i] = valid ? x[rows[lane] * spec.k + kElem + i] : 0.0f;
    LaneBlock &blk = out[lane];
    if (chipInfo(spec.chip).scaledMfma) {
      blk.scale = quantizeLaneBlock(v, blk.fp4);
    } else {
      for (int i = 0; i < 32; ++i)
        blk.bf16[i / 8][size_t(i % 8)] = toBf16(v[i]);
    }
  }
}

} // namespace

void kiln::rocdl::emu::runMxGemm(const KernelSpec &spec, const float *x,
                                 int64_t rowsTotal, const ShuffledMxWeight &w,
                                 float *y) {
  const GemmTiling &t = spec.tiling;
  const MxWeightLayout &layout = w.layout;
  const bool scaled = chipInfo(spec.chip).scaledMfma;
  auto grid = spec.grid(rowsTotal);
  for (int64_t by = 0; by < grid[1]; ++by)
    for (int64_t bx = 0; bx < grid[0]; ++bx) {
      // Per-lane state of the one wave.
      std::vector<std::array<int64_t, kWaveSize>> rowIdx(size_t(t.mTiles));
      for (int64_t mt = 0; mt < t.mTiles; ++mt)
        for (int64_t lane = 0; lane < kWaveSize; ++lane)
          rowIdx[size_t(mt)][size_t(lane)] =
              std::min(t.tileRow(by, mt) + operandRow(lane), rowsTotal - 1);
      std::vector<int64_t> nTileIdx(size_t(t.nTiles));
      for (int64_t nt = 0; nt < t.nTiles; ++nt)
        nTileIdx[size_t(nt)] = std::min(t.tileCol(bx, nt), layout.nTiles - 1);
      std::vector<WaveAcc> acc(size_t(t.mTiles * t.nTiles));
      for (WaveAcc &a : acc)
        for (auto &lane : a)
          lane.fill(0.0f);

      for (int64_t kWord = 0; kWord < layout.kWords; ++kWord) {
        int64_t count = std::min(kMxStepsPerScaleWord,
                                 layout.kSteps - kWord * kMxStepsPerScaleWord);
        std::vector<std::array<uint32_t, kWaveSize>> scaleWords(
            size_t(t.nTiles));
        for (int64_t nt = 0; nt < t.nTiles; ++nt)
          for (int64_t lane = 0; lane < kWaveSize; ++lane) {
            int64_t word = layout.scaleWord(nTileIdx[size_t(nt)], kWord, lane);
            std::memcpy(&scaleWords[size_t(nt)][size_t(lane)],
                        &w.scales[size_t(word * 4)], 4);
          }
        for (int64_t j = 0; j < count; ++j) {
          int64_t kStep = kWord * kMxStepsPerScaleWord + j;
          std::vector<std::array<LaneBlock, kWaveSize>> a(size_t(t.mTiles));
          for (int64_t mt = 0; mt < t.mTiles; ++mt)
            activationBlocks(spec, x, rowIdx[size_t(mt)].data(), kStep,
                             a[size_t(mt)].data());
          for (int64_t nt = 0; nt < t.nTiles; ++nt) {
            LaneBytes chunk[kWaveSize];
            uint32_t scaleA[kWaveSize];
            for (int64_t lane = 0; lane < kWaveSize; ++lane) {
              int64_t c = layout.dataChunk(nTileIdx[size_t(nt)], kStep, lane);
              std::memcpy(chunk[lane].data(), &w.data[size_t(c * 16)], 16);
            }
            int opSel = int(MxWeightLayout::scaleByte(j));
            for (int64_t mt = 0; mt < t.mTiles; ++mt) {
              WaveAcc &c = acc[size_t(mt * t.nTiles + nt)];
              auto &blocks = a[size_t(mt)];
              if (scaled) {
                LaneBytes aFp4[kWaveSize];
                for (int64_t lane = 0; lane < kWaveSize; ++lane) {
                  aFp4[lane] = blocks[size_t(lane)].fp4;
                  scaleA[lane] = blocks[size_t(lane)].scale;
                }
                mfmaScale16x16x128Fp4(aFp4, chunk, scaleA, 0,
                                      scaleWords[size_t(nt)].data(), opSel, c);
                continue;
              }
              // gfx942: dequantize, then eight 16x16x16 bf16 MFMAs over the
              // lane's elements [4q, 4q + 4).
              for (int64_t q = 0; q < kMxLaneK / kBf16K16LaneK; ++q) {
                LaneBf16 av[kWaveSize], bv[kWaveSize];
                for (int64_t lane = 0; lane < kWaveSize; ++lane) {
                  uint8_t e = uint8_t(scaleWords[size_t(nt)][size_t(lane)] >>
                                      (8 * opSel));
                  for (int64_t i = 0; i < kBf16K16LaneK; ++i) {
                    int64_t elem = q * kBf16K16LaneK + i;
                    av[lane][size_t(i)] =
                        blocks[size_t(lane)].bf16[elem / 8][size_t(elem % 8)];
                    bv[lane][size_t(i)] =
                        dequantizeFp4ToBf16(nibble(chunk[lane], int(elem)), e);
                  }
                }
                mfmaBf16(int(kBf16K16LaneK), av, bv, c);
              }
            }
          }
        }
      }
      // Gemm::storeResults.
      for (int64_t mt = 0; mt < t.mTiles; ++mt)
        for (int64_t nt = 0; nt < t.nTiles; ++nt)
          for (int64_t lane = 0; lane < kWaveSize; ++lane) {
            int64_t col = t.tileCol(bx, nt) * kTile + resultCol(lane);
            for (int64_t i = 0; i < 4; ++i) {
              int64_t row = t.tileRow(by, mt) + resultRow(lane, i);
              if (col < spec.n && row < rowsTotal)
                y[row * spec.n + col] =
                    acc[size_t(mt * t.nTiles + nt)][size_t(lane)][size_t(i)];
            }
          }
    }
}

//===----------------------------------------------------------------------===//
// The bf16_gemm program (GemmKernels.cpp, struct Bf16Gemm)
//===----------------------------------------------------------------------===//

void kiln::rocdl::emu::runBf16Gemm(const KernelSpec &spec, const float *x,
                                   int64_t rowsTotal, const uint16_t *w,
                                   float *y) {
  const GemmTiling &t = spec.tiling;
  const bool k32 = chipInfo(spec.chip).bf16K32;
  auto grid = spec.grid(rowsTotal);
  const int64_t kSteps = spec.k / kBf16StepK;
  for (int64_t by = 0; by < grid[1]; ++by)
    for (int64_t bx = 0; bx < grid[0]; ++bx) {
      std::vector<WaveAcc> acc(size_t(t.mTiles * t.nTiles));
      for (WaveAcc &a : acc)
        for (auto &lane : a)
          lane.fill(0.0f);
      for (int64_t kStep = 0; kStep < kSteps; ++kStep) {
        // A: the lane's 8 f32 as bf16.
        std::vector<std::array<LaneBf16, kWaveSize>> a(size_t(t.mTiles));
        for (int64_t mt = 0; mt < t.mTiles; ++mt)
          for (int64_t lane = 0; lane < kWaveSize; ++lane) {
            int64_t row =
                std::min(t.tileRow(by, mt) + operandRow(lane), rowsTotal - 1);
            int64_t k0 = kStep * kBf16StepK + operandKGroup(lane) * kBf16LaneK;
            for (int64_t i = 0; i < kBf16LaneK; ++i)
              a[size_t(mt)][size_t(lane)][size_t(i)] =
                  toBf16(x[row * spec.k + k0 + i]);
          }
        for (int64_t nt = 0; nt < t.nTiles; ++nt) {
          LaneBf16 wv[kWaveSize], lo[kWaveSize], hi[kWaveSize];
          for (int64_t lane = 0; lane < kWaveSize; ++lane) {
            int64_t wRow = std::min(
                t.tileCol(bx, nt) * kTile + operandRow(lane), spec.n - 1);
            int64_t off = bf16WeightOffset(wRow, kStep, lane, spec.k);
            for (int64_t i = 0; i < kBf16LaneK; ++i)
              wv[lane][size_t(i)] = w[off + i];
            for (int64_t i = 0; i < 4; ++i) {
              lo[lane][size_t(i)] = wv[lane][size_t(i)];
              hi[lane][size_t(i)] = wv[lane][size_t(4 + i)];
            }
          }
          for (int64_t mt = 0; mt < t.mTiles; ++mt) {
            WaveAcc &c = acc[size_t(mt * t.nTiles + nt)];
            auto &am = a[size_t(mt)];
            if (k32) {
              mfmaBf16(8, am.data(), wv, c);
            } else {
              LaneBf16 alo[kWaveSize], ahi[kWaveSize];
              for (int64_t lane = 0; lane < kWaveSize; ++lane)
                for (int64_t i = 0; i < 4; ++i) {
                  alo[lane][size_t(i)] = am[size_t(lane)][size_t(i)];
                  ahi[lane][size_t(i)] = am[size_t(lane)][size_t(4 + i)];
                }
              mfmaBf16(4, alo, lo, c);
              mfmaBf16(4, ahi, hi, c);
            }
          }
        }
      }
      for (int64_t mt = 0; mt < t.mTiles; ++mt)
        for (int64_t nt = 0; nt < t.nTiles; ++nt)
          for (int64_t lane = 0; lane < kWaveSize; ++lane) {
            int64_t col = t.tileCol(bx, nt) * kTile + resultCol(lane);
            for (int64_t i = 0; i < 4; ++i) {
              int64_t row = t.tileRow(by, mt) + resultRow(lane, i);
              if (col < spec.n && row < rowsTotal)
                y[row * spec.n + col] =
                    acc[size_t(mt * t.nTiles + nt)][size_t(lane)][size_t(i)];
            }
          }
    }
}
