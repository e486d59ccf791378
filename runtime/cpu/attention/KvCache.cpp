//===- KvCache.cpp --------------------------------------------------------===//

#include "runtime/cpu/attention/KvCache.h"

using namespace kiln::cpu;

void kiln::cpu::kvAppend(const KvView &cache, const int32_t *seqIds,
                         const int32_t *positions, int64_t tokens,
                         const float *rows) {
  const int64_t width = cache.width;
  for (int64_t t = 0; t < tokens; ++t) {
    const float *src = rows + t * width;
    uint8_t *dst = cache.row(seqIds[t], positions[t]);
    if (cache.elem == CacheElem::F32) {
      std::memcpy(dst, src, width * sizeof(float));
      continue;
    }
    uint16_t *d = reinterpret_cast<uint16_t *>(dst);
    for (int64_t i = 0; i < width; ++i)
      d[i] = floatToBf16(src[i]);
  }
}

void kiln::cpu::kvReadRow(const KvView &cache, int32_t seq, int32_t pos,
                          int64_t col, int64_t count, float *out) {
  const uint8_t *row = cache.row(seq, pos);
  if (cache.elem == CacheElem::F32) {
    std::memcpy(out, reinterpret_cast<const float *>(row) + col,
                count * sizeof(float));
    return;
  }
  const uint16_t *src = reinterpret_cast<const uint16_t *>(row) + col;
  for (int64_t i = 0; i < count; ++i)
    out[i] = bf16ToFloat(src[i]);
}

void kiln::cpu::kvRead(const KvView &cache, int32_t seq, int64_t n,
                       float *out) {
  for (int64_t p = 0; p < n; ++p)
    kvReadRow(cache, seq, int32_t(p), 0, cache.width, out + p * cache.width);
}
