//===- WeightStreamer.h - Source tensors into artifact segments -*- C++ -*-===//
//
// Streams every weight the plans use from a TensorSource (a checkpoint, or
// any other source: support/TensorSource.h) into the artifact, one tensor
// (one expert) at a time: copies BF16/F16/F32, FP8 and Quark MXFP4 bytes as
// they are, upcasts 1-D float tensors to F32, and quantizes to MXFP4 where
// the IR says so. Each tensor is released to its source after use (a
// checkpoint drops its mapped pages), so peak memory stays O(largest
// tensor) whatever the model size.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_EMIT_WEIGHTSTREAMER_H
#define KILN_PASSES_EMIT_WEIGHTSTREAMER_H

#include "passes/emit/ProgramSpec.h"
#include "runtime/artifact/ArtifactWriter.h"
#include "support/TensorSource.h"

#include <cstdio>
#include <optional>

namespace kiln::emit {

struct StreamedWeight {
  fb::Extent data;
  std::optional<fb::Extent> scales;
  fb::WeightLayout layout = fb::WeightLayout::Dense;
  fb::DType dtype = fb::DType::BF16;
  std::string source; // e.g. "bf16->mxfp4(even)"
  /// MXFP4 weights of GPU artifacts: the copy in the GPU kernels' layout
  /// (fb::WeightLayout::Mxfp4Gpu, MxWeightLayout per expert).
  std::optional<fb::Extent> gpuData, gpuScales;
};

/// How a weight is stored, as the GPU lowering sees it.
struct StoredForm {
  fb::WeightLayout layout = fb::WeightLayout::Dense;
  fb::DType dtype = fb::DType::BF16;
  bool scales = false;  // block scales beside the values
  bool gpuCopy = false; // an Mxfp4Gpu copy beside the Mxfp4 values

  /// Whether GPU matmuls can read it as MXFP4: a copy in their layout
  /// beside the checkpoint layout, or that layout alone.
  bool gpuMxfp4() const {
    return (layout == fb::WeightLayout::Mxfp4 && gpuCopy) ||
           (layout == fb::WeightLayout::Mxfp4Gpu && scales);
  }
  bool operator==(const StoredForm &o) const {
    return layout == o.layout && dtype == o.dtype && scales == o.scales &&
           gpuCopy == o.gpuCopy;
  }
  bool operator!=(const StoredForm &o) const { return !(*this == o); }
};

/// The form streamWeights gives a weight of an artifact with a GPU target
/// (no CPU panels), decided by its spec alone: kiln-lower-gpu-launches
/// lowers each dispatch from it before any byte is read, and
/// compileArtifact checks the streamed weights against it.
StoredForm storedForm(const WeightSpec &spec);
/// The form a weight was streamed in.
StoredForm storedForm(const StreamedWeight &weight);

/// Chooses how each weight is stored from the arguments that read it.
/// `MatWeight` arguments (Kernels.td) are matmul operands: the CPU reads
/// them in row panels, GPU kernels read MXFP4 ones in the GPU matmul layout
/// (Mxfp4Gpu); every other reader takes the checkpoint layout. A CPU-only
/// artifact (`gpu` false) gets panels where only matmuls read a weight; one
/// with GPU targets keeps rows for every weight and adds the Mxfp4Gpu copy
/// of the MXFP4 weights a matmul reads, instead of their checkpoint layout
/// when the artifact has no CPU target and only matmuls read them.
void chooseWeightLayouts(ProgramSpec &program, bool panels, bool gpu, bool cpu);

/// Progress of a long compile: a bar on a terminal, plain lines otherwise.
class Progress {
public:
  Progress(uint64_t totalBytes, size_t totalTensors, FILE *out);
  void advance(uint64_t bytes, size_t tensors);
  void finish();

private:
  void print(bool final);
  uint64_t total_, done_ = 0;
  size_t tensors_, tensorsDone_ = 0;
  FILE *out_;
  bool tty_;
  double start_, lastPrint_ = 0;
  int lastPercent_ = -1;
};

/// Streams every weight. An MXFP4 weight whose WeightSpec::gpuCopy says so
/// gets its GPU-layout copy, shuffled from the checkpoint-layout bytes
/// just written (Beside), or only that copy (Instead).
Result<std::vector<StreamedWeight>>
streamWeights(const std::vector<WeightSpec> &weights,
              const TensorSource &source, artifact::ArtifactWriter &writer,
              FILE *progressOut);

} // namespace kiln::emit

#endif // KILN_PASSES_EMIT_WEIGHTSTREAMER_H
