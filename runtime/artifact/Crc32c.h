//===- Crc32c.h - CRC32C (Castagnoli) checksums -----------------*- C++ -*-===//
//
// The artifact's checksum: CRC32C, reflected polynomial 0x82F63B78, initial
// value and final XOR 0xFFFFFFFF (the iSCSI / ext4 / RFC 3720 variant). Uses
// the SSE4.2 CRC32 instruction when the CPU has it, otherwise a portable
// slicing-by-8 table; both give the same values.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_CRC32C_H
#define KILN_RUNTIME_ARTIFACT_CRC32C_H

#include <cstddef>
#include <cstdint>

namespace kiln::artifact {

/// CRC32C of `size` bytes at `data`, continuing from `crc`: the value this
/// function returned for the bytes before (0 to start). So
/// crc32c(b, n2, crc32c(a, n1)) == crc32c(a ++ b, n1 + n2).
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);

namespace detail {
/// The table implementation, always available.
uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc);
/// True when the hardware implementation can run on this CPU.
bool crc32cHasHardware();
/// The SSE4.2 implementation; only call it when crc32cHasHardware().
uint32_t crc32cHardware(const void *data, size_t size, uint32_t crc);
} // namespace detail

} // namespace kiln::artifact

#endif // KILN_RUNTIME_ARTIFACT_CRC32C_H
