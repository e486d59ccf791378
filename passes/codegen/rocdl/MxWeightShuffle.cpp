//===- MxWeightShuffle.cpp ------------------------------------------------===//
//
// Both directions walk the kernel's own loop nest (tile, step, lane) and ask
// MxWeightLayout where each lane's bytes live, so the layout has exactly one
// definition.
//
//===----------------------------------------------------------------------===//

#include "passes/codegen/rocdl/MxWeightShuffle.h"

#include <cstring>

using namespace kiln::rocdl;

namespace {

/// Calls fn(row, kElem, chunk, word, byte) for every (tile, step, lane):
/// the lane's weight row, its first K element, its 16-byte data chunk, its
/// scale word and the byte in that word.
template <typename Fn> void forEachLaneBlock(const MxWeightLayout &l, Fn fn) {
  for (int64_t nt = 0; nt < l.nTiles; ++nt)
    for (int64_t ks = 0; ks < l.kSteps; ++ks)
      for (int64_t lane = 0; lane < kWaveSize; ++lane) {
        int64_t row = nt * kTile + operandRow(lane);
        int64_t kElem = mxLaneK(ks, lane);
        fn(row, kElem, l.dataChunk(nt, ks, lane),
           l.scaleWord(nt, ks / kMxStepsPerScaleWord, lane),
           MxWeightLayout::scaleByte(ks));
      }
}

} // namespace

bool kiln::rocdl::shuffleMxfp4Weight(const uint8_t *packed,
                                     const uint8_t *scales, int64_t n,
                                     int64_t k, ShuffledMxWeight &out,
                                     std::string &error) {
  if (n <= 0 || k <= 0 || k % kMxLaneK != 0) {
    error = "MXFP4 weight must be [N, K] with N > 0 and K a positive multiple "
            "of 32, got [" +
            std::to_string(n) + ", " + std::to_string(k) + "]";
    return false;
  }
  out.layout = MxWeightLayout::forShape(n, k);
  out.data.assign(size_t(out.layout.dataBytes()), 0);
  out.scales.assign(size_t(out.layout.scaleBytes()), kMxPadScale);
  const int64_t rowBytes = k / 2, rowBlocks = k / kMxLaneK;
  forEachLaneBlock(out.layout, [&](int64_t row, int64_t kElem, int64_t chunk,
                                   int64_t word, int64_t byte) {
    if (row >= n || kElem >= k)
      return; // padding: zero data, scale 1.0
    std::memcpy(&out.data[size_t(chunk * kMxLaneBytes)],
                packed + row * rowBytes + kElem / 2, kMxLaneBytes);
    out.scales[size_t(word * 4 + byte)] =
        scales[row * rowBlocks + kElem / kMxLaneK];
  });
  return true;
}

void kiln::rocdl::unshuffleMxfp4Weight(const ShuffledMxWeight &in,
                                       std::vector<uint8_t> &packed,
                                       std::vector<uint8_t> &scales) {
  const int64_t n = in.layout.n, k = in.layout.k;
  packed.assign(size_t(n * k / 2), 0);
  scales.assign(size_t(n * k / kMxLaneK), 0);
  forEachLaneBlock(in.layout, [&](int64_t row, int64_t kElem, int64_t chunk,
                                  int64_t word, int64_t byte) {
    if (row >= n || kElem >= k)
      return;
    std::memcpy(&packed[size_t(row * k / 2 + kElem / 2)],
                &in.data[size_t(chunk * kMxLaneBytes)], kMxLaneBytes);
    scales[size_t(row * (k / kMxLaneK) + kElem / kMxLaneK)] =
        in.scales[size_t(word * 4 + byte)];
  });
}
