//===- Avx512Bf16.h - Target attributes of the AVX-512 BF16 kernels -*- C++
//-*-//
//
// Internal to KilnCpu. The kernels that use vdpbf16ps and vcvtne2ps2bf16
// are compiled for baseline x86-64 and marked with these attributes; they
// run only where useAvx512Bf16() says so.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_AVX512BF16_H
#define KILN_RUNTIME_CPU_AVX512BF16_H

#define KILN_AVX512_BF16                                                       \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,fma,f16c")))
#define KILN_AVX512_BF16_INLINE                                                \
  KILN_AVX512_BF16 inline __attribute__((always_inline))

#endif // KILN_RUNTIME_CPU_AVX512BF16_H
