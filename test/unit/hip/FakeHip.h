//===- FakeHip.h - What the stand-in libamdhip64 records -------*- C++ -*-===//
//
// FakeHip.cpp exports `kiln_fake_hip_last_launch` of this layout; the tests
// read it through dlsym. KILN_FAKE_HIP_DEVICES sets its device count.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_HIP_FAKEHIP_H
#define KILN_TEST_UNIT_HIP_FAKEHIP_H

#include <cstddef>

extern "C" {
struct FakeLaunch {
  unsigned grid[3], block[3], shared;
  int hasStream;
  size_t argBytes;
  unsigned char args[256];
  int launches; // launches so far, all kernels
};
}

#endif // KILN_TEST_UNIT_HIP_FAKEHIP_H
