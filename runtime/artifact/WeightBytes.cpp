//===- WeightBytes.cpp - Sizes a weight's segments must have --------------===//

#include "runtime/artifact/ArtifactChecks.h"
#include "support/WeightPanels.h"

#include <sstream>

namespace kiln::artifact {
namespace {

std::string formatShape(const int64_t *shape, size_t rank) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < rank; ++i)
    os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

} // namespace

unsigned dtypeBits(fb::DType dtype) {
  switch (dtype) {
  case fb::DType::F32:
  case fb::DType::I32:
    return 32;
  case fb::DType::BF16:
  case fb::DType::F16:
    return 16;
  case fb::DType::F8E4M3:
  case fb::DType::E8M0:
  case fb::DType::U8:
    return 8;
  case fb::DType::F4E2M1:
    return 4;
  case fb::DType::I64:
    return 64;
  }
  return 0;
}

Result<WeightBytes> expectedWeightBytes(fb::WeightLayout layout,
                                        fb::DType dtype, const int64_t *shape,
                                        size_t rank, const std::string &what) {
  unsigned bits = dtypeBits(dtype);
  if (bits == 0)
    return makeError(StatusCode::InvalidArgument, what, ": dtype ",
                     static_cast<int>(dtype), " is not a known DType");
  if (layout != fb::WeightLayout::Dense &&
      layout != fb::WeightLayout::DensePanel4 &&
      layout != fb::WeightLayout::Fp8Block128 &&
      layout != fb::WeightLayout::Mxfp4 &&
      layout != fb::WeightLayout::Mxfp4Panel4 &&
      layout != fb::WeightLayout::Mxfp4Gpu)
    return makeError(StatusCode::InvalidArgument, what, ": layout ",
                     static_cast<int>(layout), " is not a known WeightLayout");
  if (rank > MAX_RANK)
    return makeError(StatusCode::InvalidArgument, what, ": shape has rank ",
                     rank, ", expected at most ", MAX_RANK);
  WeightBytes out;
  out.elements = 1;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 1 || shape[i] > MAX_DIM)
      return makeError(StatusCode::InvalidArgument, what, ": shape ",
                       formatShape(shape, rank), " has dim ", i, " = ",
                       shape[i], ", expected 1 to ", MAX_DIM);
    if (__builtin_mul_overflow(out.elements, static_cast<uint64_t>(shape[i]),
                               &out.elements) ||
        out.elements > MAX_ELEMENTS)
      return makeError(StatusCode::InvalidArgument, what, ": shape ",
                       formatShape(shape, rank), " has more than ",
                       MAX_ELEMENTS, " elements");
  }
  const char *layoutName = fb::EnumNameWeightLayout(layout);
  const char *dtypeName = fb::EnumNameDType(dtype);
  uint64_t lastDim = rank ? static_cast<uint64_t>(shape[rank - 1]) : 1;
  if (dtype == fb::DType::F4E2M1 && lastDim % 2 != 0)
    return makeError(StatusCode::InvalidArgument, what, ": shape ",
                     formatShape(shape, rank), " has an odd last dim ", lastDim,
                     ": F4E2M1 packs two elements per byte along it");

  if (layout == fb::WeightLayout::Dense) {
    out.data = out.elements * bits / 8;
    return out;
  }
  if (layout == fb::WeightLayout::DensePanel4) {
    if (dtype != fb::DType::BF16)
      return makeError(StatusCode::InvalidArgument, what, ": layout ",
                       layoutName, " needs dtype BF16, found ", dtypeName);
    if (rank < 2 || !panelable(shape[rank - 2], shape[rank - 1]))
      return makeError(StatusCode::InvalidArgument, what, ": layout ",
                       layoutName,
                       " needs a shape [.., N, K] with N a multiple "
                       "of ",
                       kPanelRows, " and K of ", kPanelCols, ", found ",
                       formatShape(shape, rank));
    out.data = out.elements * bits / 8;
    return out;
  }
  const bool mxfp4 = layout == fb::WeightLayout::Mxfp4 ||
                     layout == fb::WeightLayout::Mxfp4Panel4 ||
                     layout == fb::WeightLayout::Mxfp4Gpu;
  fb::DType needed = mxfp4 ? fb::DType::F4E2M1 : fb::DType::F8E4M3;
  if (dtype != needed)
    return makeError(StatusCode::InvalidArgument, what, ": layout ", layoutName,
                     " needs dtype ", fb::EnumNameDType(needed), ", found ",
                     dtypeName);
  if (rank < 2)
    return makeError(StatusCode::InvalidArgument, what, ": layout ", layoutName,
                     " needs a shape [.., N, K], found ",
                     formatShape(shape, rank));
  uint64_t n = static_cast<uint64_t>(shape[rank - 2]);
  uint64_t k = lastDim;
  uint64_t matrices = out.elements / (n * k);
  if (layout == fb::WeightLayout::Mxfp4Panel4 && n % kPanelRows != 0)
    return makeError(StatusCode::InvalidArgument, what, ": layout ", layoutName,
                     " needs N a multiple of ", kPanelRows, ", found ",
                     formatShape(shape, rank));
  if (mxfp4) {
    if (k % 32 != 0)
      return makeError(StatusCode::InvalidArgument, what, ": shape ",
                       formatShape(shape, rank), " has last dim K = ", k,
                       ", expected a multiple of 32 (the MX block size)");
    if (layout == fb::WeightLayout::Mxfp4Gpu) // a GPU-only artifact's copy
      return mxfp4GpuBytes(shape, rank);
    out.data = out.elements / 2;
    out.scales = out.elements / 32; // one E8M0 byte per 32 along K
    return out;
  }
  out.data = out.elements; // one F8E4M3 byte each
  out.scales = matrices * ceilDiv(n, 128) * ceilDiv(k, 128) * sizeof(float);
  return out;
}

WeightBytes mxfp4GpuBytes(const int64_t *shape, size_t rank) {
  WeightBytes out;
  if (rank < 2)
    return out;
  uint64_t n = uint64_t(shape[rank - 2]), k = uint64_t(shape[rank - 1]);
  uint64_t matrices = 1;
  for (size_t i = 0; i + 2 < rank; ++i)
    matrices *= uint64_t(shape[i]);
  uint64_t nTiles = ceilDiv(n, 16), kSteps = ceilDiv(k, 128);
  uint64_t kWords = ceilDiv(kSteps, 4);
  out.elements = matrices * n * k;
  out.data = matrices * nTiles * kSteps * 64 * 16;
  out.scales = matrices * nTiles * kWords * 64 * 4;
  return out;
}

} // namespace kiln::artifact
