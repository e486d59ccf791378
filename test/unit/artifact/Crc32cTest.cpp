//===- Crc32cTest.cpp - CRC32C vectors, both implementations --------------===//

#include "runtime/artifact/Crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

using namespace kiln::artifact;

namespace {

using CrcFn = uint32_t (*)(const void *, size_t, uint32_t);

std::vector<CrcFn> implementations() {
  std::vector<CrcFn> fns = {detail::crc32cPortable};
  if (detail::crc32cHasHardware())
    fns.push_back(detail::crc32cHardware);
  return fns;
}

TEST(Crc32c, KnownVectors) {
  // "123456789" is the CRC catalogue's check value; the 32-byte vectors are
  // from RFC 3720 (iSCSI), appendix B.4.
  std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), ascending(32);
  std::iota(ascending.begin(), ascending.end(), 0);
  for (CrcFn fn : implementations()) {
    EXPECT_EQ(fn("123456789", 9, 0), 0xE3069283u);
    EXPECT_EQ(fn(zeros.data(), 32, 0), 0x8A9136AAu);
    EXPECT_EQ(fn(ones.data(), 32, 0), 0x62A8AB43u);
    EXPECT_EQ(fn(ascending.data(), 32, 0), 0x46DD794Eu);
    EXPECT_EQ(fn("", 0, 0), 0u);
  }
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
}

TEST(Crc32c, StreamingAndAlignmentDoNotChangeTheValue) {
  std::vector<uint8_t> data(1000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<uint8_t>(i * 131 + 7);
  for (CrcFn fn : implementations()) {
    uint32_t whole = fn(data.data(), data.size(), 0);
    EXPECT_EQ(whole, detail::crc32cPortable(data.data(), data.size(), 0));
    for (size_t split : {1, 3, 8, 13, 500, 999}) {
      uint32_t first = fn(data.data(), split, 0);
      EXPECT_EQ(fn(data.data() + split, data.size() - split, first), whole)
          << "split at " << split;
    }
    // Unaligned starts exercise the byte-wise head of the hardware loop.
    for (size_t start = 1; start < 8; ++start)
      EXPECT_EQ(fn(data.data() + start, 100, 0),
                detail::crc32cPortable(data.data() + start, 100, 0));
  }
}

} // namespace
