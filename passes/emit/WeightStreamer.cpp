//===- WeightStreamer.cpp -------------------------------------------------===//

#include "passes/emit/WeightStreamer.h"

#include "passes/codegen/rocdl/MxWeightShuffle.h"
#include "passes/emit/DequantizedRows.h"
#include "passes/emit/Mxfp4Quantize.h"
#include "support/FloatFormats.h"
#include "support/WeightPanels.h"

#include <chrono>
#include <cstring>

using namespace kiln;
using namespace kiln::emit;

namespace {

constexpr size_t kChunk = size_t(8) << 20;

double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string expertName(const std::string &pattern, int64_t e) {
  std::string name = pattern;
  size_t at = name.find("{e}");
  if (at != std::string::npos)
    name.replace(at, 3, std::to_string(e));
  return name;
}

Status expectTensor(const TensorView &t, std::initializer_list<Dtype> dtypes,
                    const std::vector<int64_t> &shape) {
  bool dtypeOk = false;
  for (Dtype d : dtypes)
    dtypeOk |= t.dtype == d;
  if (!dtypeOk || t.shape != shape)
    return makeError(StatusCode::InvalidArgument, "tensor '", t.name, "' is ",
                     t.describe(), ", expected shape ", shapeToString(shape),
                     " of another dtype");
  return Status::ok();
}

/// A tensor as a spec reads it: the whole checkpoint tensor, or one matrix
/// axis's slice of it (rows: a view into the source; columns: gathered into
/// `storage`). `source` is what gets released once written.
struct Piece {
  const TensorView *source = nullptr;
  TensorView view;
  std::vector<uint8_t> storage;
  bool mapped() const { return storage.empty(); }
};

/// `t` cut to [first, first + count) along matrix axis `axis` (0 rows, 1
/// columns), counted in t's own elements; axis < 0 keeps it whole.
Result<Piece> slicePiece(const TensorView *t, int64_t axis, int64_t first,
                         int64_t count) {
  Piece p;
  p.source = t;
  p.view = *t;
  if (axis < 0)
    return p;
  size_t es = dtypeSize(t->dtype);
  if (t->shape.size() == 1 && axis == 0) { // a vector: elements
    if (first + count > t->shape[0])
      return makeError(StatusCode::InvalidArgument, "tensor '", t->name,
                       "' is ", t->describe(), ": its elements [", first, ", ",
                       first + count, ") this rank holds are past its end");
    p.view.shape[0] = count;
    p.view.byteSize = uint64_t(count) * es;
    p.view.data = t->data + size_t(first) * es;
    return p;
  }
  if (t->shape.size() != 2)
    return makeError(StatusCode::InvalidArgument, "tensor '", t->name, "' is ",
                     t->describe(),
                     "; only matrices and vectors can be sliced");
  int64_t rows = t->shape[0], cols = t->shape[1];
  int64_t dim = axis == 0 ? rows : cols;
  if (first + count > dim)
    return makeError(StatusCode::InvalidArgument, "tensor '", t->name, "' is ",
                     t->describe(), ": its ", axis == 0 ? "rows" : "columns",
                     " [", first, ", ", first + count,
                     ") this rank holds are past its end");
  p.view.shape[size_t(axis)] = count;
  p.view.byteSize = uint64_t(p.view.numElements()) * es;
  if (axis == 0) {
    p.view.data = t->data + size_t(first * cols) * es;
    return p;
  }
  p.storage.resize(p.view.byteSize);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(p.storage.data() + size_t(r * count) * es,
                t->data + size_t(r * cols + first) * es, size_t(count) * es);
  p.view.data = p.storage.data();
  return p;
}

class Streamer {
public:
  Streamer(const TensorSource &source, artifact::ArtifactWriter &writer,
           Progress &progress)
      : source_(source), writer_(writer), progress_(progress) {}

  Result<StreamedWeight> stream(const WeightSpec &spec);

private:
  /// Expert `e` of `pattern` (or the plain tensor), cut to the spec's
  /// slice. `unit` is how many logical elements one of this tensor's
  /// elements spans along the sliced axis (2 for packed E2M1 columns, 32
  /// for MXFP4 scale columns, 128 for FP8 block scales); a partial last
  /// block is counted whole.
  Result<Piece> piece(const WeightSpec &spec, const std::string &pattern,
                      int64_t e, int64_t unit = 1) {
    KILN_ASSIGN_OR_RETURN(
        const TensorView *t,
        source_.get(expertName(pattern, spec.firstExpert + e)));
    int64_t axis = spec.sliceAxis, count = 0;
    if (axis >= 0 && spec.sliceFirst % unit != 0)
      return makeError(StatusCode::InvalidArgument, "tensor '", t->name,
                       "': a slice from ", spec.sliceFirst,
                       " does not start on one of its blocks of ", unit);
    if (axis >= 0) {
      size_t dim =
          spec.shape.size() == 1 ? 0 : spec.shape.size() - 2 + size_t(axis);
      count = (spec.shape[dim] + unit - 1) / unit;
    }
    return slicePiece(t, axis, spec.sliceFirst / unit, count);
  }
  /// Appends a piece's bytes; pages of the mapped source are dropped as
  /// they are written.
  Status copy(const Piece &p) {
    const TensorView &t = p.view;
    for (uint64_t off = 0; off < t.byteSize; off += kChunk) {
      uint64_t n = std::min<uint64_t>(kChunk, t.byteSize - off);
      KILN_RETURN_IF_ERROR(writer_.append(t.data + off, n));
      if (p.mapped())
        source_.release(t.data + off, n);
    }
    return Status::ok();
  }
  /// Appends a piece of `rows` rows of K units in row panels with `chunk`
  /// units a chunk (support/WeightPanels.h), one panel of rows at a time.
  Status copyPanels(const Piece &p, int64_t rows, int64_t K, int64_t chunk) {
    const TensorView &t = p.view;
    const size_t unit = dtypeSize(t.dtype);
    const size_t panelBytes = size_t(kPanelRows * K) * unit;
    std::vector<uint8_t> panel(panelBytes);
    for (int64_t n = 0; n < rows; n += kPanelRows) {
      const uint8_t *src = t.data + size_t(n * K) * unit;
      packPanels(src, panel.data(), kPanelRows, K, unit, chunk);
      KILN_RETURN_IF_ERROR(writer_.append(panel.data(), panelBytes));
      if (p.mapped())
        source_.release(src, panelBytes);
    }
    return Status::ok();
  }
  Status copyAsF32(const Piece &p) {
    const TensorView &t = p.view;
    size_t size = dtypeSize(t.dtype);
    std::vector<float> buf;
    uint64_t count = t.numElements();
    for (uint64_t i = 0; i < count; i += kChunk / 4) {
      uint64_t n = std::min<uint64_t>(kChunk / 4, count - i);
      buf.resize(n);
      for (uint64_t j = 0; j < n; ++j)
        buf[j] = floatAt(t.dtype, t.data + (i + j) * size);
      KILN_RETURN_IF_ERROR(writer_.append(buf.data(), n * 4));
      if (p.mapped())
        source_.release(t.data + i * size, n * size);
    }
    return Status::ok();
  }
  void done(const Piece &p) {
    source_.release(p.source->data, p.source->byteSize);
    progress_.advance(p.source->byteSize, 1);
  }
  /// The whole source tensors of expert `e` of a spec read through a
  /// Window (quantized and dequantized weights): its values and, when the
  /// spec names them, its scales.
  struct Sources {
    const TensorView *values = nullptr, *scales = nullptr;
  };
  Result<Sources> sources(const WeightSpec &spec, int64_t e,
                          const std::vector<int64_t> &shape) {
    Sources out;
    if (shape.size() != 2)
      return makeError(StatusCode::InvalidArgument, "weight '", spec.name,
                       "': only matrices can be quantized or dequantized, "
                       "found shape ",
                       shapeToString(shape));
    KILN_ASSIGN_OR_RETURN(
        out.values, source_.get(expertName(spec.name, spec.firstExpert + e)));
    if (!spec.scaleName.empty()) {
      KILN_ASSIGN_OR_RETURN(
          out.scales,
          source_.get(expertName(spec.scaleName, spec.firstExpert + e)));
    }
    return out;
  }
  /// Checks a float or FP8 source matrix against the spec: the spec's
  /// shape, but for a sliced axis long enough for the slice.
  static Status expectWindowed(const TensorView &t, const WeightSpec &spec,
                               const std::vector<int64_t> &shape) {
    bool fits = t.shape.size() == 2;
    for (size_t a = 0; fits && a < 2; ++a)
      fits = int64_t(a) == spec.sliceAxis
                 ? t.shape[a] >= spec.sliceFirst + shape[a]
                 : t.shape[a] == shape[a];
    if (!fits)
      return makeError(StatusCode::InvalidArgument, "tensor '", t.name, "' is ",
                       t.describe(), ", expected shape ", shapeToString(shape),
                       spec.sliceAxis < 0    ? ""
                       : spec.sliceAxis == 0 ? " (rows from "
                                             : " (columns from ",
                       spec.sliceAxis < 0 ? ""
                                          : std::to_string(spec.sliceFirst),
                       spec.sliceAxis < 0 ? "" : ")");
    return Status::ok();
  }
  /// This rank's window of each source matrix, in values.
  static Window window(const WeightSpec &spec,
                       const std::vector<int64_t> &shape) {
    return {spec.sliceAxis == 0 ? spec.sliceFirst : 0, shape[0],
            spec.sliceAxis == 1 ? spec.sliceFirst : 0, shape[1]};
  }
  void release(const Sources &src) {
    for (const TensorView *v : {src.values, src.scales})
      if (v) {
        source_.release(v->data, v->byteSize);
        progress_.advance(v->byteSize, 1);
      }
  }
  /// Expert `e` of a dequantized weight (Dense with scales, Mxfp4Dequant),
  /// this rank's window of it as f32 rows (DequantizedRows.h). The source
  /// tensors are read whole, so the window may cut their blocks.
  Status dequantized(const WeightSpec &spec, int64_t e,
                     const std::vector<int64_t> &shape, std::string &how) {
    KILN_ASSIGN_OR_RETURN(Sources src, sources(spec, e, shape));
    const TensorView *t = src.values, *s = src.scales;
    const Window w = window(spec, shape);
    RowSink sink = [&](const float *row) {
      return writer_.append(row, uint64_t(w.cols) * 4);
    };
    if (t->dtype != Dtype::U8)
      KILN_RETURN_IF_ERROR(expectWindowed(*t, spec, shape));
    if (spec.kind == WeightKind::Mxfp4Dequant) {
      auto rule = spec.evenRule ? Mxfp4ScaleRule::Even : Mxfp4ScaleRule::Floor;
      KILN_RETURN_IF_ERROR(roundTripMxfp4(*t, s, rule, w, sink));
      how = std::string(dtypeName(t->dtype)) + "->mxfp4(" +
            (spec.evenRule ? "even" : "floor") + ")->F32";
    } else if (t->dtype == Dtype::U8) {
      KILN_RETURN_IF_ERROR(dequantizeMxfp4(*t, *s, w, sink));
      how = "mxfp4 x E8M0 scales->F32";
    } else {
      KILN_RETURN_IF_ERROR(dequantizeFp8(*t, *s, w, sink));
      how = "F8_E4M3 x block scales->F32";
    }
    release(src);
    return Status::ok();
  }
  Result<StreamedWeight> dense(const WeightSpec &spec);
  Result<StreamedWeight> copied(const WeightSpec &spec);
  Result<StreamedWeight> quantized(const WeightSpec &spec);

  const TensorSource &source_;
  artifact::ArtifactWriter &writer_;
  Progress &progress_;
};

/// The per-matrix shape of a spec (drops the expert dimension).
std::vector<int64_t> matrixShape(const WeightSpec &spec) {
  if (spec.experts > 0)
    return {spec.shape.begin() + 1, spec.shape.end()};
  return spec.shape;
}

Result<StreamedWeight> Streamer::dense(const WeightSpec &spec) {
  StreamedWeight out;
  out.layout = fb::WeightLayout::Dense;
  out.dtype = storedForm(spec).dtype;
  std::vector<int64_t> shape = matrixShape(spec);
  int64_t count = std::max<int64_t>(spec.experts, 1);
  const bool panels = spec.panels && out.dtype == fb::DType::BF16 &&
                      shape.size() == 2 && panelable(shape[0], shape[1]);
  if (panels)
    out.layout = fb::WeightLayout::DensePanel4;
  KILN_RETURN_IF_ERROR(writer_.beginSegment());
  for (int64_t e = 0; e < count; ++e) {
    if (!spec.scaleName.empty() || spec.kind == WeightKind::Mxfp4Dequant) {
      KILN_RETURN_IF_ERROR(dequantized(spec, e, shape, out.source));
      continue;
    }
    KILN_ASSIGN_OR_RETURN(Piece p, piece(spec, spec.name, e));
    const TensorView *t = &p.view;
    KILN_RETURN_IF_ERROR(
        expectTensor(*t, {Dtype::BF16, Dtype::F16, Dtype::F32}, shape));
    bool same = (t->dtype == Dtype::BF16 && out.dtype == fb::DType::BF16) ||
                (t->dtype == Dtype::F16 && out.dtype == fb::DType::F16) ||
                (t->dtype == Dtype::F32 && out.dtype == fb::DType::F32);
    if (same && panels) {
      KILN_RETURN_IF_ERROR(copyPanels(p, shape[0], shape[1], kPanelCols));
    } else if (same) {
      KILN_RETURN_IF_ERROR(copy(p));
    } else if (out.dtype == fb::DType::F32) {
      KILN_RETURN_IF_ERROR(copyAsF32(p));
    } else {
      return makeError(StatusCode::InvalidArgument, "tensor '", t->name,
                       "' is ", dtypeName(t->dtype),
                       " but the program reads it as ",
                       fb::EnumNameDType(out.dtype));
    }
    out.source =
        std::string(dtypeName(t->dtype)) + "->" + fb::EnumNameDType(out.dtype);
    done(p);
  }
  KILN_ASSIGN_OR_RETURN(out.data, writer_.endSegment());
  return out;
}

/// FP8 and Quark MXFP4: values and scales are copied as they are.
Result<StreamedWeight> Streamer::copied(const WeightSpec &spec) {
  StreamedWeight out;
  bool fp8 = spec.kind == WeightKind::Fp8Block;
  out.layout = fp8 ? fb::WeightLayout::Fp8Block128 : fb::WeightLayout::Mxfp4;
  out.dtype = fp8 ? fb::DType::F8E4M3 : fb::DType::F4E2M1;
  out.source = fp8 ? "fp8 block 128x128 (checkpoint)" : "mxfp4 (checkpoint)";
  std::vector<int64_t> shape = matrixShape(spec);
  int64_t n = shape[0], k = shape[1];
  std::vector<int64_t> valueShape =
      fp8 ? shape : std::vector<int64_t>{n, k / 2};
  std::vector<int64_t> scaleShape =
      fp8 ? std::vector<int64_t>{(n + 127) / 128, (k + 127) / 128}
          : std::vector<int64_t>{n, k / 32};
  int64_t count = std::max<int64_t>(spec.experts, 1);
  const bool panels = !fp8 && spec.panels && n % kPanelRows == 0;
  if (panels)
    out.layout = fb::WeightLayout::Mxfp4Panel4;
  for (int pass = 0; pass < 2; ++pass) {
    KILN_RETURN_IF_ERROR(writer_.beginSegment());
    for (int64_t e = 0; e < count; ++e) {
      const std::string &pattern = pass == 0 ? spec.name : spec.scaleName;
      // Units of the sliced axis per stored element: packed E2M1 columns
      // hold two values, MXFP4 scales cover 32 columns, FP8 scales 128x128.
      int64_t unit = fp8 ? (pass == 0 ? 1 : 128)
                         : (spec.sliceAxis == 1 ? (pass == 0 ? 2 : 32) : 1);
      KILN_ASSIGN_OR_RETURN(Piece p, piece(spec, pattern, e, unit));
      const TensorView *t = &p.view;
      if (pass == 0)
        KILN_RETURN_IF_ERROR(
            expectTensor(*t, {fp8 ? Dtype::F8_E4M3 : Dtype::U8}, valueShape));
      else
        KILN_RETURN_IF_ERROR(
            expectTensor(*t, {fp8 ? Dtype::F32 : Dtype::U8}, scaleShape));
      if (panels) // values 16 bytes a chunk, scales 1
        KILN_RETURN_IF_ERROR(copyPanels(p, n, k / (pass == 0 ? 2 : 32),
                                        pass == 0 ? kPanelCols / 2 : 1));
      else
        KILN_RETURN_IF_ERROR(copy(p));
      done(p);
    }
    KILN_ASSIGN_OR_RETURN(fb::Extent extent, writer_.endSegment());
    if (pass == 0)
      out.data = extent;
    else
      out.scales = extent;
  }
  return out;
}

/// Kiln's own MXFP4 quantization of a float or FP8 source.
Result<StreamedWeight> Streamer::quantized(const WeightSpec &spec) {
  StreamedWeight out;
  out.layout = fb::WeightLayout::Mxfp4;
  out.dtype = fb::DType::F4E2M1;
  auto rule = spec.evenRule ? Mxfp4ScaleRule::Even : Mxfp4ScaleRule::Floor;
  std::vector<int64_t> shape = matrixShape(spec);
  int64_t n = shape[0], k = shape[1];
  int64_t count = std::max<int64_t>(spec.experts, 1);
  const bool panels = spec.panels && n % kPanelRows == 0;
  if (panels)
    out.layout = fb::WeightLayout::Mxfp4Panel4;
  const int64_t rowsPerWrite = panels ? kPanelRows : 1;
  std::vector<uint8_t> scales(size_t(count * n * (k / 32)));
  std::vector<float> row(k);
  // The values of rowsPerWrite rows, row-major, and in panels.
  std::vector<uint8_t> packed(size_t(rowsPerWrite * k / 2)),
      panel(packed.size());
  const Window w = window(spec, shape);
  KILN_RETURN_IF_ERROR(writer_.beginSegment());
  for (int64_t e = 0; e < count; ++e) {
    KILN_ASSIGN_OR_RETURN(Sources src, sources(spec, e, shape));
    const TensorView *t = src.values, *s = src.scales;
    KILN_RETURN_IF_ERROR(expectWindowed(*t, spec, shape));
    KILN_RETURN_IF_ERROR(checkFloatSource(*t, s, w));
    out.source = std::string(dtypeName(t->dtype)) + "->mxfp4(" +
                 (spec.evenRule ? "even" : "floor") + ")";
    for (int64_t r = 0; r < n; ++r) {
      floatRow(*t, s, w.row0 + r, w.col0, k, row.data());
      quantizeMxfp4Row(row.data(), k, rule,
                       packed.data() + (r % rowsPerWrite) * (k / 2),
                       scales.data() + size_t((e * n + r) * (k / 32)));
      if ((r + 1) % rowsPerWrite == 0) {
        if (panels)
          packPanels(packed.data(), panel.data(), kPanelRows, k / 2, 1,
                     kPanelCols / 2);
        KILN_RETURN_IF_ERROR(
            writer_.append((panels ? panel : packed).data(), packed.size()));
      }
    }
    if (panels) {
      std::vector<uint8_t> rowMajor(scales.begin() + e * n * (k / 32),
                                    scales.begin() + (e + 1) * n * (k / 32));
      packPanels(rowMajor.data(), scales.data() + e * n * (k / 32), n, k / 32,
                 1, 1);
    }
    release(src);
  }
  KILN_ASSIGN_OR_RETURN(out.data, writer_.endSegment());
  KILN_ASSIGN_OR_RETURN(fb::Extent se,
                        writer_.writeSegment(scales.data(), scales.size()));
  out.scales = se;
  return out;
}

Result<StreamedWeight> Streamer::stream(const WeightSpec &spec) {
  switch (spec.kind) {
  case WeightKind::Dense:
  case WeightKind::Mxfp4Dequant:
    return dense(spec);
  case WeightKind::Fp8Block:
  case WeightKind::Mxfp4Raw:
    return copied(spec);
  case WeightKind::Mxfp4Quant:
    return quantized(spec);
  }
  return makeError(StatusCode::Internal, "unknown weight kind");
}

/// Reads each expert's checkpoint-layout MXFP4 bytes back from `from` and
/// writes them shuffled (rocdl::shuffleMxfp4Weight) to `to`, experts one
/// after another.
Status appendGpuCopy(const WeightSpec &spec, artifact::ArtifactWriter &from,
                     artifact::ArtifactWriter &to, StreamedWeight &w) {
  std::vector<int64_t> shape = matrixShape(spec);
  int64_t n = shape[0], k = shape[1];
  int64_t count = std::max<int64_t>(spec.experts, 1);
  size_t dataBytes = size_t(n * k / 2), scaleBytes = size_t(n * k / 32);
  std::vector<uint8_t> packed(dataBytes), scales(scaleBytes);
  std::vector<rocdl::ShuffledMxWeight> shuffled;
  std::vector<uint8_t> allScales;
  KILN_RETURN_IF_ERROR(to.beginSegment());
  for (int64_t e = 0; e < count; ++e) {
    KILN_RETURN_IF_ERROR(from.readBack(w.data, uint64_t(e) * dataBytes,
                                       packed.data(), dataBytes));
    KILN_RETURN_IF_ERROR(from.readBack(*w.scales, uint64_t(e) * scaleBytes,
                                       scales.data(), scaleBytes));
    rocdl::ShuffledMxWeight one;
    std::string error;
    if (!rocdl::shuffleMxfp4Weight(packed.data(), scales.data(), n, k, one,
                                   error))
      return makeError(StatusCode::InvalidArgument, error);
    KILN_RETURN_IF_ERROR(to.append(one.data.data(), one.data.size()));
    allScales.insert(allScales.end(), one.scales.begin(), one.scales.end());
  }
  KILN_ASSIGN_OR_RETURN(fb::Extent data, to.endSegment());
  KILN_ASSIGN_OR_RETURN(fb::Extent sc,
                        to.writeSegment(allScales.data(), allScales.size()));
  w.gpuData = data;
  w.gpuScales = sc;
  return Status::ok();
}

/// A weight whose only copy is the GPU layout: streamed in the checkpoint
/// layout into a scratch file beside the artifact (its temporary files go
/// when the scratch writer does), shuffled from there into the artifact.
/// Disk holds one extra weight (one expert stack) at a time.
Result<StreamedWeight> streamGpuOnly(const WeightSpec &spec,
                                     const TensorSource &source,
                                     artifact::ArtifactWriter &writer,
                                     Progress &progress) {
  KILN_ASSIGN_OR_RETURN(auto scratch, artifact::ArtifactWriter::create(
                                          writer.path() + ".scratch"));
  Streamer streamer(source, *scratch, progress);
  KILN_ASSIGN_OR_RETURN(StreamedWeight rows, streamer.stream(spec));
  if (rows.layout != fb::WeightLayout::Mxfp4 || !rows.scales)
    return makeError(StatusCode::Internal, "a GPU-only copy needs an MXFP4 "
                                           "weight in the checkpoint layout");
  KILN_RETURN_IF_ERROR(appendGpuCopy(spec, *scratch, writer, rows));
  StreamedWeight out;
  out.layout = fb::WeightLayout::Mxfp4Gpu;
  out.dtype = rows.dtype;
  out.data = *rows.gpuData;
  out.scales = *rows.gpuScales;
  out.source = rows.source + ", GPU layout only";
  return out;
}

} // namespace

Progress::Progress(uint64_t totalBytes, size_t totalTensors, FILE *out)
    : total_(totalBytes), tensors_(totalTensors), out_(out),
      tty_(out && isatty(fileno(out))), start_(now()) {}

void Progress::advance(uint64_t bytes, size_t tensors) {
  done_ += bytes;
  tensorsDone_ += tensors;
  print(false);
}

void Progress::finish() {
  // Plain output already said 100%; a terminal bar gets its final line.
  if (tty_ || lastPercent_ != 100)
    print(true);
}

void Progress::print(bool final) {
  if (!out_)
    return;
  double t = now(), elapsed = t - start_;
  int percent = total_ ? int(100.0 * double(done_) / double(total_)) : 100;
  if (!final) {
    if (tty_ && t - lastPrint_ < 0.1)
      return;
    if (!tty_ && percent / 10 == lastPercent_ / 10)
      return;
  }
  lastPrint_ = t;
  lastPercent_ = percent;
  double rate = elapsed > 0 ? double(done_) / elapsed : 0;
  double left = rate > 0 ? double(total_ - done_) / rate : 0;
  char line[256];
  std::snprintf(line, sizeof(line),
                "%3d%% tensors %zu/%zu  %.2f/%.2f GB  %.0f MB/s  %s %.0fs",
                percent, tensorsDone_, tensors_, double(done_) / 1e9,
                double(total_) / 1e9, rate / 1e6, final ? "took" : "left",
                final ? elapsed : left);
  if (tty_) {
    int width = 30, filled = total_ ? int(width * done_ / total_) : width;
    std::string bar(size_t(filled), '=');
    bar.resize(size_t(width), ' ');
    std::fprintf(out_, "\r[%s] %s", bar.c_str(), line);
    if (final)
      std::fputc('\n', out_);
  } else {
    std::fprintf(out_, "kiln-compile: weights %s\n", line);
  }
  std::fflush(out_);
}

Result<std::vector<StreamedWeight>>
kiln::emit::streamWeights(const std::vector<WeightSpec> &weights,
                          const TensorSource &source,
                          artifact::ArtifactWriter &writer, FILE *progressOut) {
  uint64_t totalBytes = 0;
  size_t totalTensors = 0;
  for (const WeightSpec &w : weights) {
    int64_t count = std::max<int64_t>(w.experts, 1);
    for (int64_t e = 0; e < count; ++e) {
      for (const std::string *n : {&w.name, &w.scaleName}) {
        if (n->empty())
          continue;
        if (const TensorView *t =
                source.find(expertName(*n, w.firstExpert + e))) {
          totalBytes += t->byteSize;
          ++totalTensors;
        }
      }
    }
  }
  Progress progress(totalBytes, totalTensors, progressOut);
  Streamer streamer(source, writer, progress);
  std::vector<StreamedWeight> out;
  out.reserve(weights.size());
  for (const WeightSpec &w : weights) {
    using GpuCopy = WeightSpec::GpuCopy;
    auto streamed = w.gpuCopy == GpuCopy::Instead
                        ? streamGpuOnly(w, source, writer, progress)
                        : streamer.stream(w);
    if (!streamed.isOk())
      return streamed.status().withContext("weight '" + w.name + "'");
    StreamedWeight sw = std::move(streamed).value();
    if (w.gpuCopy == GpuCopy::Beside && sw.layout == fb::WeightLayout::Mxfp4) {
      Status s = appendGpuCopy(w, writer, writer, sw);
      if (!s.isOk())
        return s.withContext("weight '" + w.name + "' (GPU copy)");
    }
    out.push_back(std::move(sw));
  }
  progress.finish();
  return out;
}

void kiln::emit::chooseWeightLayouts(ProgramSpec &program, bool panels,
                                     bool gpu, bool cpu) {
  std::vector<bool> used(program.weights.size(), false),
      matmulOnly(program.weights.size(), true),
      byMatmul(program.weights.size(), false);
  for (const PlanSpec &p : program.plans)
    for (const DispatchSpec &d : p.dispatches)
      for (size_t i = 0; i < d.args.size(); ++i) {
        if (d.args[i].kind != ArgKind::Weight)
          continue;
        const abi::ArgDecl *decl = abi::argDeclAt(d.kernel, i, d.args.size());
        bool matmul = decl && decl->panels;
        used[d.args[i].index] = true;
        byMatmul[d.args[i].index] = byMatmul[d.args[i].index] || matmul;
        if (!matmul)
          matmulOnly[d.args[i].index] = false;
      }
  for (size_t w = 0; w < program.weights.size(); ++w) {
    WeightSpec &spec = program.weights[w];
    spec.panels = panels && !gpu && used[w] && matmulOnly[w] &&
                  spec.kind != WeightKind::Fp8Block;
    bool mxfp4 = spec.kind == WeightKind::Mxfp4Raw ||
                 spec.kind == WeightKind::Mxfp4Quant;
    using GpuCopy = WeightSpec::GpuCopy;
    spec.gpuCopy = !gpu || !mxfp4 || !byMatmul[w] ? GpuCopy::None
                   : !cpu && matmulOnly[w]        ? GpuCopy::Instead
                                                  : GpuCopy::Beside;
  }
}

StoredForm kiln::emit::storedForm(const WeightSpec &spec) {
  using GpuCopy = WeightSpec::GpuCopy;
  StoredForm f;
  switch (spec.kind) {
  case WeightKind::Dense:
  case WeightKind::Mxfp4Dequant:
    f.layout = fb::WeightLayout::Dense;
    f.dtype = spec.dtype == ElemType::F32    ? fb::DType::F32
              : spec.dtype == ElemType::BF16 ? fb::DType::BF16
                                             : fb::DType::F16;
    break;
  case WeightKind::Fp8Block:
    f.layout = fb::WeightLayout::Fp8Block128;
    f.dtype = fb::DType::F8E4M3;
    f.scales = true;
    break;
  case WeightKind::Mxfp4Raw:
  case WeightKind::Mxfp4Quant:
    f.layout = spec.gpuCopy == GpuCopy::Instead ? fb::WeightLayout::Mxfp4Gpu
                                                : fb::WeightLayout::Mxfp4;
    f.dtype = fb::DType::F4E2M1;
    f.scales = true;
    f.gpuCopy = spec.gpuCopy == GpuCopy::Beside;
    break;
  }
  return f;
}

StoredForm kiln::emit::storedForm(const StreamedWeight &w) {
  return {w.layout, w.dtype, w.scales.has_value(),
          w.gpuData.has_value() && w.gpuScales.has_value()};
}
