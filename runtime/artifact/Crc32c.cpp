//===- Crc32c.cpp - CRC32C (Castagnoli) checksums -------------------------===//

#include "runtime/artifact/Crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define KILN_CRC32C_X86 1
#endif

namespace kiln::artifact {
namespace {

constexpr uint32_t kPolynomial = 0x82F63B78u; // reflected 0x1EDC6F41

using Tables = std::array<std::array<uint32_t, 256>, 8>;

// tables[k][b]: the CRC of byte b followed by k zero bytes (slicing-by-8).
const Tables &tables() {
  static const Tables t = [] {
    Tables out{};
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int i = 0; i < 8; ++i)
        c = (c >> 1) ^ ((c & 1) ? kPolynomial : 0);
      out[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; ++b)
      for (int k = 1; k < 8; ++k)
        out[k][b] = (out[k - 1][b] >> 8) ^ out[0][out[k - 1][b] & 0xff];
    return out;
  }();
  return t;
}

} // namespace

namespace detail {

uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc) {
  const Tables &t = tables();
  const auto *p = static_cast<const uint8_t *>(data);
  uint32_t c = ~crc;
  while (size >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^
        t[4][lo >> 24] ^ t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^
        t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size--)
    c = (c >> 8) ^ t[0][(c ^ *p++) & 0xff];
  return ~c;
}

#ifdef KILN_CRC32C_X86

bool crc32cHasHardware() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("sse4.2");
}

__attribute__((target("sse4.2"))) uint32_t crc32cHardware(const void *data,
                                                          size_t size,
                                                          uint32_t crc) {
  const auto *p = static_cast<const uint8_t *>(data);
  uint64_t c = ~crc;
  while (size && (reinterpret_cast<uintptr_t>(p) & 7)) {
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
    --size;
  }
  while (size >= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);
    c = _mm_crc32_u64(c, v);
    p += 8;
    size -= 8;
  }
  while (size--)
    c = _mm_crc32_u8(static_cast<uint32_t>(c), *p++);
  return ~static_cast<uint32_t>(c);
}

#else

bool crc32cHasHardware() { return false; }

uint32_t crc32cHardware(const void *data, size_t size, uint32_t crc) {
  return crc32cPortable(data, size, crc);
}

#endif

} // namespace detail

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
  static const bool hardware = detail::crc32cHasHardware();
  return hardware ? detail::crc32cHardware(data, size, crc)
                  : detail::crc32cPortable(data, size, crc);
}

} // namespace kiln::artifact
