//===- FakeHip.h - What the stand-in libamdhip64 records -------*- C++ -*-===//
//
// FakeHip.cpp exports `kiln_fake_hip_last_launch` of this layout; the tests
// read it through dlsym. KILN_FAKE_HIP_DEVICES sets its device count. Built
// with KILN_FAKE_HIP_GRAPHS it also has stream capture: a captured launch is
// counted, not made, and each graph launch counts its captured launches.
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
  int launches; // launches so far, all kernels (those of graphs included)
  // The graph variant (KILN_FAKE_HIP_GRAPHS): graphs captured and graph
  // launches so far.
  int captures, graphLaunches;
};
}

#endif // KILN_TEST_UNIT_HIP_FAKEHIP_H
