//===- KernelSpec.cpp -----------------------------------------------------===//

#include "passes/codegen/rocdl/KernelSpec.h"

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace kiln::rocdl;

const ChipInfo &kiln::rocdl::chipInfo(Chip chip) {
  // LDS: the LLVM limits (AMDGPU.md section 2).
  static const ChipInfo kGfx950 = {"gfx950", 163840, true, true};
  static const ChipInfo kGfx942 = {"gfx942", 65536, false, false};
  return chip == Chip::Gfx950 ? kGfx950 : kGfx942;
}

std::optional<Chip> kiln::rocdl::chipFromName(std::string_view name) {
  if (name == "gfx950")
    return Chip::Gfx950;
  if (name == "gfx942")
    return Chip::Gfx942;
  return std::nullopt;
}

std::optional<KernelKind>
kiln::rocdl::kernelKindFromName(std::string_view name) {
  for (size_t i = 0; i < kKernelKindNames.size(); ++i)
    if (kKernelKindNames[i] == name)
      return KernelKind(i);
  return std::nullopt;
}

static bool isGemm(KernelKind kind) {
  return kind == KernelKind::MxGemm || kind == KernelKind::Bf16Gemm;
}

void KernelSpec::chooseTiling() {
  if (!isGemm(kind))
    return;
  // One wave per workgroup. Two M tiles share each weight load once there
  // are rows for them (prefill); decode keeps one so that no MFMA runs on
  // padding rows. Four N tiles share each activation load (and, for MXFP4,
  // its quantization).
  tiling.mTiles = m > kTile ? 2 : 1;
  tiling.nTiles = std::max<int64_t>(1, std::min<int64_t>(4, ceilDiv(n, kTile)));
}

std::string KernelSpec::validate() const {
  std::ostringstream os;
  auto positive = [&](const char *what, int64_t v) {
    if (v <= 0 && os.tellp() == 0)
      os << kernelKindName(kind) << ": " << what << " must be positive, got "
         << v;
  };
  switch (kind) {
  case KernelKind::MxGemm:
  case KernelKind::Bf16Gemm: {
    positive("N", n);
    positive("K", k);
    positive("M tiles", tiling.mTiles);
    positive("N tiles", tiling.nTiles);
    int64_t multiple = kind == KernelKind::MxGemm ? kMxLaneK : kBf16StepK;
    if (os.tellp() == 0 && k % multiple != 0)
      os << kernelKindName(kind) << ": K must be a multiple of " << multiple
         << ", got " << k;
    // Element offsets are 32-bit (index-bitwidth=32).
    if (os.tellp() == 0 && n * k >= (int64_t(1) << 31))
      os << kernelKindName(kind) << ": weight [" << n << ", " << k
         << "] has 2^31 or more elements, beyond 32-bit indexing";
    if (os.tellp() == 0 && (tiling.mTiles > 4 || tiling.nTiles > 8))
      os << kernelKindName(kind) << ": tiling " << tiling.mTiles << "x"
         << tiling.nTiles << " exceeds the register budget (at most 4x8)";
    break;
  }
  case KernelKind::Rope:
    positive("heads", heads);
    positive("head dim", headDim);
    positive("rotary dim", rotaryDim);
    if (os.tellp() == 0 &&
        (rotaryDim % 2 != 0 || offset < 0 || offset + rotaryDim > headDim))
      os << "rope: rotary dims [" << offset << ", " << offset + rotaryDim
         << ") must be an even-sized range inside the head dim " << headDim;
    if (os.tellp() == 0 && !(theta > 1.0f))
      os << "rope: theta must be > 1, got " << theta;
    break;
  default:
    positive("cols", cols);
    break;
  }
  return os.str();
}

int64_t KernelSpec::blockSize() const {
  return isGemm(kind) ? kWaveSize : kRowBlock;
}

std::array<int64_t, 3> KernelSpec::grid(int64_t rows) const {
  if (isGemm(kind))
    return {tiling.gridX(n), tiling.gridY(rows), 1};
  return {rows, 1, 1};
}

int64_t KernelSpec::declaredWavesPerSimd() const {
  // GEMMs keep to 128 registers per lane (arch + accumulation, 4 waves per
  // SIMD): up to 32 accumulators and a step's operands. The MXFP4 GEMM with
  // two M tiles (prefill) holds twice a step's activations -- 64 f32 on
  // gfx950 before quantization, beside two tiles' dequantized bf16 weights
  // on gfx942 -- and gets 256 (2 waves), which the MFMA-bound prefill
  // tolerates. Row kernels are small.
  if (!isGemm(kind))
    return 8;
  return kind == KernelKind::MxGemm && tiling.mTiles > 1 ? 2 : 4;
}

static std::string floatTag(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  std::ostringstream os;
  os << std::hex << bits;
  return os.str();
}

std::string KernelSpec::symbol() const {
  std::ostringstream os;
  os << "kiln_" << kernelKindName(kind);
  switch (kind) {
  case KernelKind::MxGemm:
  case KernelKind::Bf16Gemm:
    os << "_n" << n << "_k" << k << "_t" << tiling.mTiles << "x"
       << tiling.nTiles;
    break;
  case KernelKind::RmsNorm:
    os << "_c" << cols << "_eps" << floatTag(eps);
    break;
  case KernelKind::Rope:
    os << (neox ? "_neox" : "_interleaved") << "_h" << heads << "_d" << headDim
       << "_o" << offset << "_r" << rotaryDim << "_theta" << floatTag(theta);
    break;
  default:
    os << "_c" << cols;
    break;
  }
  os << "_" << chipInfo(chip).name;
  return os.str();
}
