//===- Weights.cpp - Artifact weights as CPU kernel views -----------------===//

#include "runtime/engine/Weights.h"

#include "runtime/cpu/Dequant.h"
#include "support/WeightPanels.h"

#include <sstream>

namespace kiln::engine {
namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

std::string describeWeight(const fb::Weight &weight) {
  std::ostringstream os;
  if (weight.layout() != fb::WeightLayout::Dense)
    os << fb::EnumNameWeightLayout(weight.layout()) << ' ';
  os << fb::EnumNameDType(weight.dtype()) << " [";
  if (weight.shape())
    for (uint32_t i = 0; i < weight.shape()->size(); ++i)
      os << (i ? ", " : "") << weight.shape()->Get(i);
  os << ']';
  return os.str();
}

void bindWeight(const artifact::Artifact &artifact, uint32_t index,
                BoundWeight &out) {
  const fb::Weight &w = *artifact.meta()->weights()->Get(index);
  out.name = w.name()->str();
  out.shape.assign(w.shape()->begin(), w.shape()->end());
  const uint8_t *data = artifact.bytes(*w.data());
  const uint8_t *scales = w.scales() ? artifact.bytes(*w.scales()) : nullptr;
  const int64_t rank = out.rank();
  auto reject = [&](const std::string &why) {
    out.unsupported = describeWeight(w) + ": " + why;
  };

  cpu::WeightFormat format;
  int64_t elemBytesNum = 0, elemBytesDen = 1; // bytes per element, as a ratio
  switch (w.layout()) {
  case fb::WeightLayout::Dense:
    switch (w.dtype()) {
    case fb::DType::F32:
      format = cpu::WeightFormat::F32;
      elemBytesNum = 4;
      break;
    case fb::DType::BF16:
      format = cpu::WeightFormat::BF16;
      elemBytesNum = 2;
      break;
    case fb::DType::F16:
      format = cpu::WeightFormat::F16;
      elemBytesNum = 2;
      break;
    default:
      return reject("the CPU runtime reads Dense weights as F32, BF16 or F16");
    }
    break;
  case fb::WeightLayout::DensePanel4:
    if (w.dtype() != fb::DType::BF16)
      return reject("the CPU runtime reads DensePanel4 weights as BF16");
    format = cpu::WeightFormat::BF16;
    elemBytesNum = 2;
    break;
  case fb::WeightLayout::Fp8Block128:
    format = cpu::WeightFormat::FP8;
    elemBytesNum = 1;
    break;
  case fb::WeightLayout::Mxfp4Gpu:
    // The shuffled layout of the GPU matmuls: bound by shape only.
    out.deviceOnly = "weight '" + out.name + "' (" + describeWeight(w) +
                     ") is stored only in the GPU matmul layout (an artifact "
                     "compiled without the cpu target)";
    data = nullptr;
    scales = nullptr;
    [[fallthrough]];
  case fb::WeightLayout::Mxfp4:
  case fb::WeightLayout::Mxfp4Panel4:
    format = cpu::WeightFormat::MXFP4;
    elemBytesNum = 1;
    elemBytesDen = 2;
    break;
  default:
    return reject("unknown layout");
  }

  if (rank == 1) {
    if (w.layout() != fb::WeightLayout::Dense)
      return reject("a rank-1 weight must be Dense");
    const int64_t n = out.shape[0];
    if (format == cpu::WeightFormat::F32) {
      out.values = reinterpret_cast<const float *>(data);
      return;
    }
    out.owned.resize(size_t(n));
    cpu::WeightView row;
    row.format = format;
    row.data = data;
    row.rows = 1;
    row.cols = n;
    cpu::dequantizeRow(row, 0, out.owned.data());
    out.values = out.owned.data();
    return;
  }
  if (rank != 2 && rank != 3)
    return reject("expected rank 1 (vector), 2 (matrix) or 3 (expert stack)");

  const int64_t count = rank == 3 ? out.shape[0] : 1;
  const int64_t n = out.shape[rank - 2], k = out.shape[rank - 1];
  cpu::WeightView &v = out.view;
  v.format = format;
  v.data = data;
  v.scales = scales;
  v.rows = n;
  v.cols = k;
  v.count = count;
  v.dataStride = n * k * elemBytesNum / elemBytesDen;
  if (w.layout() == fb::WeightLayout::DensePanel4 ||
      w.layout() == fb::WeightLayout::Mxfp4Panel4) {
    if (!panelable(n, k))
      return reject("row panels need N a multiple of 4 and K of 32");
    v.panelRows = kPanelRows;
  }
  if (format == cpu::WeightFormat::FP8)
    v.scaleStride = ceilDiv(n, 128) * ceilDiv(k, 128) * int64_t(sizeof(float));
  else if (format == cpu::WeightFormat::MXFP4)
    v.scaleStride = n * (k / 32);
}

} // namespace kiln::engine
