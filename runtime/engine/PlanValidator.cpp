//===- PlanValidator.cpp - Plans checked against the kernel contract ------===//
//
// Runs once per plan at load. Each dispatch is checked for a known kernel,
// then against its declaration (support/abi/Kernels.td, through
// abi::signatureError: argument count and kinds, buffer dtypes, outputs that
// do not alias inputs where the kernel cannot work in place, parameters of
// the kernel's type), then by the kernel's own rules below: rows kinds that
// agree, row widths that agree with the kernel's weights and caches, and
// parameter values in range. Errors read
//   plan 'prefill' dispatches[12] matmul ("layers.0.q_a_proj"): args[2]
//   'out': 384 values per row, expected 128 (the weight's N)
//
//===----------------------------------------------------------------------===//

#include "runtime/artifact/KernelParamsFb.h"
#include "runtime/engine/ExpertExchange.h"
#include "runtime/engine/ValidatedPlan.h"
#include "support/abi/MoeRules.h"
#include "support/abi/Signature.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace kiln::engine {

using abi::Kernel;

namespace {

const char *rowsName(fb::Rows rows) {
  return abi::rowsKindName(abi::RowsKind(rows));
}

std::string shapeString(const BufferInfo &b) {
  std::ostringstream os;
  os << '[' << rowsName(b.rows);
  for (int64_t d : b.rowShape)
    os << ", " << d;
  os << ']';
  return os.str();
}

} // namespace

class PlanValidator {
public:
  PlanValidator(const fb::Artifact &meta, const fb::Plan &plan,
                const std::vector<BoundWeight> &weights, ValidatedPlan &out)
      : meta_(meta), plan_(plan), weights_(weights), r_(out) {}

  Status run() {
    KILN_RETURN_IF_ERROR(checkBuffers());
    KILN_RETURN_IF_ERROR(checkIo());
    const auto *dispatches = plan_.dispatches();
    uint32_t n = dispatches ? dispatches->size() : 0;
    if (n == 0)
      return makeError(StatusCode::InvalidArgument, "plan '", r_.name_,
                       "': has no dispatches");
    for (uint32_t i = 0; i < n; ++i)
      KILN_RETURN_IF_ERROR(checkDispatch(i, *dispatches->Get(i)));
    return Status::ok();
  }

private:
  // --- Plan-level checks --------------------------------------------------

  Status planError(const std::string &what) const {
    return makeError(StatusCode::InvalidArgument, "plan '", r_.name_,
                     "': ", what);
  }

  Status checkBuffers() {
    const auto *buffers = plan_.buffers();
    uint32_t n = buffers ? buffers->size() : 0;
    for (uint32_t i = 0; i < n; ++i) {
      const fb::Buffer &b = *buffers->Get(i);
      BufferInfo info;
      info.name = b.name() ? b.name()->str() : "";
      info.dtype = b.dtype();
      info.rows = b.rows();
      if (b.row_shape())
        info.rowShape.assign(b.row_shape()->begin(), b.row_shape()->end());
      for (int64_t d : info.rowShape) {
        if (__builtin_mul_overflow(info.rowElems, d, &info.rowElems) ||
            info.rowElems > (int64_t(1) << 40))
          return planError("buffers[" + std::to_string(i) + "] '" + info.name +
                           "': row_shape has too many elements");
      }
      if (info.dtype != fb::DType::F32 && info.dtype != fb::DType::I32)
        return planError("buffers[" + std::to_string(i) + "] '" + info.name +
                         "': dtype " + fb::EnumNameDType(info.dtype) +
                         ", the CPU runtime supports F32 and I32 buffers");
      r_.buffers_.push_back(std::move(info));
    }
    return Status::ok();
  }

  Status ioBuffer(uint32_t index, const char *what, fb::DType dtype,
                  fb::Rows rows, int64_t elems /* -1: any */) {
    const BufferInfo &b = r_.buffers_[index];
    if (b.dtype != dtype || b.rows != rows ||
        (elems >= 0 && b.rowElems != elems))
      return planError(
          std::string(what) + " is buffers[" + std::to_string(index) + "] '" +
          b.name + "' " + fb::EnumNameDType(b.dtype) + " " + shapeString(b) +
          ", expected " + fb::EnumNameDType(dtype) + " [" + rowsName(rows) +
          (elems > 1 ? ", " + std::to_string(elems) : "") +
          (elems < 0 ? ", ..." : "") + "]");
    return Status::ok();
  }

  Status checkIo() {
    uint32_t nIn = plan_.inputs() ? plan_.inputs()->size() : 0;
    uint32_t nOut = plan_.outputs() ? plan_.outputs()->size() : 0;
    if (nIn < 4 || nIn > 5)
      return planError("has " + std::to_string(nIn) +
                       " inputs, expected 4 (token_ids, seq_ids, positions, "
                       "logit_rows) or 5 (+ hidden_in)");
    if (nOut < 1 || nOut > 2)
      return planError("has " + std::to_string(nOut) +
                       " outputs, expected 1 (logits) or 2 (+ hidden)");
    const auto *in = plan_.inputs();
    r_.tokenIds_ = in->Get(abi::kInputTokenIds);
    r_.seqIds_ = in->Get(abi::kInputSeqIds);
    r_.positions_ = in->Get(abi::kInputPositions);
    r_.logitRows_ = in->Get(abi::kInputLogitRows);
    KILN_RETURN_IF_ERROR(ioBuffer(r_.tokenIds_, "input token_ids",
                                  fb::DType::I32, fb::Rows::Tokens, 1));
    KILN_RETURN_IF_ERROR(ioBuffer(r_.seqIds_, "input seq_ids", fb::DType::I32,
                                  fb::Rows::Tokens, 1));
    KILN_RETURN_IF_ERROR(ioBuffer(r_.positions_, "input positions",
                                  fb::DType::I32, fb::Rows::Tokens, 1));
    KILN_RETURN_IF_ERROR(ioBuffer(r_.logitRows_, "input logit_rows",
                                  fb::DType::I32, fb::Rows::Selected, 1));
    if (nIn == 5) {
      r_.hiddenIn_ = in->Get(abi::kInputHidden);
      KILN_RETURN_IF_ERROR(ioBuffer(uint32_t(r_.hiddenIn_), "input hidden_in",
                                    fb::DType::F32, fb::Rows::Tokens, -1));
    }
    std::set<uint32_t> distinct(in->begin(), in->end());
    if (distinct.size() != nIn)
      return planError("two inputs share one buffer");

    const auto *out = plan_.outputs();
    r_.logits_ = out->Get(abi::kOutputLogits);
    KILN_RETURN_IF_ERROR(ioBuffer(r_.logits_, "output logits", fb::DType::F32,
                                  fb::Rows::Selected, -1));
    if (nOut == 2) {
      r_.hiddenOut_ = out->Get(abi::kOutputHidden);
      KILN_RETURN_IF_ERROR(ioBuffer(uint32_t(r_.hiddenOut_), "output hidden",
                                    fb::DType::F32, fb::Rows::Tokens, -1));
      if (r_.hiddenIn_ >= 0 && r_.buffers_[r_.hiddenIn_].rowElems !=
                                   r_.buffers_[r_.hiddenOut_].rowElems)
        return planError("hidden_in has " +
                         std::to_string(r_.buffers_[r_.hiddenIn_].rowElems) +
                         " values per row but the hidden output has " +
                         std::to_string(r_.buffers_[r_.hiddenOut_].rowElems));
    }
    return Status::ok();
  }

  // --- Dispatch checks ----------------------------------------------------

  template <typename... Args> Status fail(const Args &...args) const {
    return makeError(StatusCode::InvalidArgument, prefix_, args...);
  }

  std::string argLabel(size_t i) const {
    return abi::argLabel(step_.kernel, i, args());
  }
  size_t args() const { return step_.args.size(); }
  const fb::Arg &arg(size_t i) const { return step_.args[i]; }

  // The argument getters: abi::signatureError has checked each argument's
  // kind and element type against Kernels.td before a kernel's own rules
  // run.
  const BufferInfo *buffer(size_t i) const {
    return &r_.buffers_[arg(i).index()];
  }
  Result<const BoundWeight *> weight(size_t i) const {
    const BoundWeight &w = weights_[arg(i).index()];
    if (!w.unsupported.empty())
      return fail(argLabel(i), ": weight '", w.name, "' ", w.unsupported);
    const abi::ArgDecl *decl = abi::argDeclAt(step_.kernel, i, args());
    if (w.view.panelRows != 1 && !(decl && decl->panels))
      return fail(argLabel(i), ": weight '", w.name,
                  "' is stored in row panels (DensePanel4), which only "
                  "matmul arguments read");
    return &w;
  }
  Result<const BoundWeight *> matrix(size_t i) const {
    KILN_ASSIGN_OR_RETURN(const BoundWeight *w, weight(i));
    if (!w->isMatrix())
      return fail(argLabel(i), ": weight '", w->name, "' has rank ", w->rank(),
                  ", expected a matrix [N, K]");
    return w;
  }
  Result<const BoundWeight *> stack(size_t i) const {
    KILN_ASSIGN_OR_RETURN(const BoundWeight *w, weight(i));
    if (!w->isStack())
      return fail(argLabel(i), ": weight '", w->name, "' has rank ", w->rank(),
                  ", expected an expert stack [E, N, K]");
    return w;
  }
  Result<const BoundWeight *> vector(size_t i) const {
    KILN_ASSIGN_OR_RETURN(const BoundWeight *w, weight(i));
    if (!w->isVector())
      return fail(argLabel(i), ": weight '", w->name, "' has rank ", w->rank(),
                  ", expected a vector [D]");
    return w;
  }
  const fb::Cache *cache(size_t i) const {
    return meta_.caches()->Get(arg(i).index());
  }
  bool isNone(size_t i) const { return arg(i).kind() == fb::ArgKind::None; }

  Status width(size_t i, const BufferInfo &b, int64_t expected,
               const std::string &why) const {
    if (b.rowElems != expected)
      return fail(argLabel(i), ": buffer '", b.name, "' ", shapeString(b),
                  " has ", b.rowElems, " values per row, expected ", expected,
                  " (", why, ")");
    return Status::ok();
  }
  Status sameRows(size_t i, const BufferInfo &b, size_t j,
                  const BufferInfo &c) const {
    if (b.rows != c.rows)
      return fail(argLabel(j), ": buffer '", c.name, "' has ", rowsName(c.rows),
                  " rows but ", argLabel(i), " '", b.name, "' has ",
                  rowsName(b.rows));
    return Status::ok();
  }
  Status divides(size_t i, const BufferInfo &b, int64_t d,
                 const std::string &why) const {
    if (d <= 0 || b.rowElems % d != 0)
      return fail(argLabel(i), ": buffer '", b.name, "' has ", b.rowElems,
                  " values per row, not a multiple of ", d, " (", why, ")");
    return Status::ok();
  }

  Status checkDispatch(uint32_t index, const fb::Dispatch &d) {
    const fb::Kernel &kernel = *meta_.kernels()->Get(d.kernel());
    std::string kname = kernel.name()->str();
    std::string location = d.location() ? d.location()->str() : "";
    prefix_ = "plan '" + r_.name_ + "' dispatches[" + std::to_string(index) +
              "] " + kname +
              (location.empty() ? "" : " (\"" + location + "\")") + ": ";
    step_ = Step();
    step_.dispatch = index;
    if (!abi::kernelFromName(kname, step_.kernel))
      return fail("unknown kernel '", kname, "' (kernels[", d.kernel(),
                  "]), expected one of support/abi/Kernels.td");
    std::vector<abi::ArgRef> refs;
    if (d.args())
      for (const fb::Arg *a : *d.args()) {
        step_.args.push_back(*a);
        refs.push_back({abi::RefKind(a->kind()), a->index()});
      }
    if (!abi::readParams(step_.kernel, d, step_.params))
      return fail("params: holds ", fb::EnumNameKernelParams(d.params_type()),
                  ", expected ",
                  fb::EnumNameKernelParams(abi::paramsTag(step_.kernel)));
    std::string error = abi::signatureError(
        step_.kernel, refs, step_.params, [&](uint32_t index) {
          const BufferInfo &b = r_.buffers_[index];
          return abi::BufferFacts{b.name,
                                  b.dtype == fb::DType::F32 ? abi::ElemType::F32
                                  : b.dtype == fb::DType::I32
                                      ? abi::ElemType::I32
                                      : abi::ElemType::Other,
                                  abi::RowsKind(b.rows), b.rowElems};
        });
    if (!error.empty())
      return fail(error);

    KILN_RETURN_IF_ERROR(checkKernel());
    r_.steps_.push_back(std::move(step_));
    return Status::ok();
  }

  Status checkKernel() {
    switch (step_.kernel) {
    case Kernel::Embedding:
      return checkEmbedding();
    case Kernel::RmsNorm:
    case Kernel::LayerNorm:
      return checkNorm();
    case Kernel::Matmul:
      return checkMatmul();
    case Kernel::Rope:
      return checkRope();
    case Kernel::Add:
    case Kernel::Mul:
      return checkBinary();
    case Kernel::Softmax:
    case Kernel::Normalize:
    case Kernel::GroupLimit:
    case Kernel::Argmax:
      return checkRowOp();
    case Kernel::TopK:
      return checkTopK();
    case Kernel::Gather:
      return checkGather();
    case Kernel::Split:
    case Kernel::Concat:
      return checkSplitConcat();
    case Kernel::KvAppend:
      return checkKvAppend();
    case Kernel::MlaAttention:
      return checkMla();
    case Kernel::IndexerTopK:
      return checkIndexer();
    case Kernel::GqaAttention:
      return checkGqa();
    case Kernel::Moe:
      return checkMoe();
    case Kernel::DispatchRows:
      return checkDispatchRows();
    default:
      break;
    }
    // Kernels.td says all there is to check about the others.
    return Status::ok();
  }

  Status checkEmbedding() {
    KILN_ASSIGN_OR_RETURN(const BoundWeight *table, matrix(1));
    const BufferInfo *out = buffer(2);
    KILN_RETURN_IF_ERROR(
        width(2, *out, table->view.cols, "the table's row width"));
    if (arg(0).index() == r_.tokenIds_)
      r_.tokenLimit_ = r_.tokenLimit_ == 0
                           ? table->view.rows
                           : std::min(r_.tokenLimit_, table->view.rows);
    return Status::ok();
  }

  Status checkNorm() {
    bool layer = step_.kernel == Kernel::LayerNorm;
    const BufferInfo *x = buffer(0);
    KILN_ASSIGN_OR_RETURN(const BoundWeight *w, vector(1));
    step_.cols = w->length();
    KILN_RETURN_IF_ERROR(divides(0, *x, step_.cols, "the weight's length"));
    if (layer) {
      KILN_ASSIGN_OR_RETURN(const BoundWeight *b, vector(2));
      if (b->length() != step_.cols)
        return fail(argLabel(2), ": bias '", b->name, "' has length ",
                    b->length(), ", expected ", step_.cols,
                    " (the weight's length)");
    }
    float eps = layer ? step_.get<abi::LayerNormParams>().eps
                      : step_.get<abi::RmsNormParams>().eps;
    if (!(eps >= 0.0f))
      return fail("params.eps ", eps, ", expected >= 0");
    return Status::ok();
  }

  Status checkMatmul() {
    const BufferInfo *x = buffer(0);
    KILN_ASSIGN_OR_RETURN(const BoundWeight *w, matrix(1));
    const BufferInfo *out = buffer(2);
    KILN_RETURN_IF_ERROR(
        width(0, *x, w->view.cols, "the weight '" + w->name + "' K"));
    KILN_RETURN_IF_ERROR(
        width(2, *out, w->view.rows, "the weight '" + w->name + "' N"));
    return Status::ok();
  }

  Status checkRope() {
    const BufferInfo *x = buffer(0);
    const auto &p = step_.get<abi::RopeParams>();
    int64_t style = p.style, offset = p.offset, rotary = p.rotaryDim,
            heads = p.heads;
    if (style != 0 && style != 1)
      return fail("params.style ", style,
                  ", expected 0 (interleaved) or 1 (neox)");
    if (heads < 1)
      return fail("params.heads ", heads, ", expected >= 1");
    KILN_RETURN_IF_ERROR(divides(0, *x, heads, "params.heads"));
    int64_t dim = x->rowElems / heads;
    if (offset < 0 || rotary < 2 || rotary % 2 != 0 || offset + rotary > dim)
      return fail("rotates dims [", offset, ", ", offset + rotary,
                  ") (params.offset, params.rotary_dim), expected an even "
                  "rotary_dim >= 2 inside the head dim ",
                  dim);
    if (!(p.theta > 0.0f))
      return fail("params.theta ", p.theta, ", expected > 0");
    step_.ropeStyle =
        style == 0 ? cpu::RopeStyle::Interleaved : cpu::RopeStyle::Neox;
    step_.heads = heads;
    step_.headDim = dim;
    return Status::ok();
  }

  /// A broadcast operand: a vector weight, or a buffer with one row.
  Result<int64_t> broadcastLength(size_t i) const {
    if (arg(i).kind() == fb::ArgKind::Weight) {
      KILN_ASSIGN_OR_RETURN(const BoundWeight *w, vector(i));
      return w->length();
    }
    const BufferInfo *b = buffer(i);
    if (b->rows != fb::Rows::One)
      return fail(argLabel(i), ": cannot broadcast buffer '", b->name,
                  "' with ", rowsName(b->rows), " rows");
    return b->rowElems;
  }

  Status checkBinary() {
    const BufferInfo *out = buffer(2);
    auto isFull = [&](size_t i) {
      if (arg(i).kind() != fb::ArgKind::Buffer)
        return false;
      const BufferInfo &b = r_.buffers_[arg(i).index()];
      return b.dtype == fb::DType::F32 && b.rows == out->rows &&
             b.rowElems == out->rowElems;
    };
    size_t full = 0, other = 1;
    if (!isFull(0)) {
      if (!isFull(1)) {
        // Report against lhs: it must match the output.
        if (arg(0).kind() != fb::ArgKind::Buffer)
          return fail(argLabel(0), ": is a ",
                      fb::EnumNameArgKind(arg(0).kind()), " and ", argLabel(1),
                      " does not match the output either; expected one "
                      "operand of the output's shape ",
                      shapeString(*out));
        const BufferInfo *lhs = buffer(0);
        KILN_RETURN_IF_ERROR(sameRows(2, *out, 0, *lhs));
        return width(0, *lhs, out->rowElems, "the output's width");
      }
      full = 1;
      other = 0;
      step_.swap = true;
    }
    if (isFull(other))
      return Status::ok();
    KILN_ASSIGN_OR_RETURN(int64_t len, broadcastLength(other));
    if (len < 1 || out->rowElems % len != 0)
      return fail(argLabel(other), ": broadcasts ", len,
                  " values over rows of ", out->rowElems,
                  ", expected the output's row width or a divisor of it");
    step_.broadcast = true;
    step_.cols = len;
    (void)full;
    return Status::ok();
  }

  // Row kernels work on the innermost dim of a [rows, ..., cols] tensor.
  // The input may be a reshape alias, so the column count comes from the
  // output (a fresh value) and the element counts.
  Status checkRowOp() {
    bool argmax = step_.kernel == Kernel::Argmax;
    const BufferInfo *x = buffer(0);
    const BufferInfo *out = buffer(1);
    if (argmax) {
      KILN_RETURN_IF_ERROR(
          divides(0, *x, out->rowElems, "one index per row of the output"));
      step_.cols = x->rowElems / out->rowElems;
      return Status::ok();
    }
    step_.cols = out->lastDim();
    if (step_.kernel == Kernel::GroupLimit) {
      int64_t nGroup = step_.get<abi::GroupLimitParams>().nGroup,
              keep = step_.get<abi::GroupLimitParams>().topkGroup;
      if (nGroup < 1 || step_.cols % nGroup != 0 || keep < 1 || keep > nGroup)
        return fail("groups ", nGroup, " keep ", keep, " over ", step_.cols,
                    " columns, expected groups dividing the columns and "
                    "1 <= keep <= groups");
    }
    return Status::ok();
  }

  Status checkTopK() {
    const BufferInfo *x = buffer(0);
    const BufferInfo *values = buffer(1);
    step_.k = step_.get<abi::TopKParams>().k;
    if (step_.k < 1)
      return fail("k ", step_.k, ", expected >= 1");
    KILN_RETURN_IF_ERROR(divides(1, *values, step_.k, "k per row"));
    int64_t groups = values->rowElems / step_.k;
    KILN_RETURN_IF_ERROR(divides(0, *x, groups, "the output's rows of k"));
    step_.cols = x->rowElems / groups;
    if (step_.k > step_.cols)
      return fail("k ", step_.k, ", expected at most ", step_.cols,
                  " (the input's last dim)");
    return Status::ok();
  }

  Status checkGather() {
    const BufferInfo *x = buffer(0);
    const BufferInfo *out = buffer(2);
    step_.k = out->lastDim();
    int64_t groups = out->rowElems / step_.k;
    KILN_RETURN_IF_ERROR(divides(0, *x, groups, "the output's rows of k"));
    step_.cols = x->rowElems / groups;
    return Status::ok();
  }

  // Split and concat copy blocks along `axis` (counting the rows dim as 0).
  Status checkSplitConcat() {
    bool split = step_.kernel == Kernel::Split;
    size_t whole = split ? 0 : args() - 1;
    std::vector<size_t> pieces;
    for (size_t i = 0; i < args(); ++i)
      if (i != whole)
        pieces.push_back(i);
    const BufferInfo &w = r_.buffers_[arg(whole).index()];
    int64_t total = 0;
    for (size_t i : pieces) {
      const BufferInfo *p = buffer(i);
      total += p->rowElems;
    }
    KILN_RETURN_IF_ERROR(
        width(whole, w, total, "the sum of the pieces along the axis"));
    const int64_t axis = split ? step_.get<abi::SplitParams>().axis
                               : step_.get<abi::ConcatParams>().axis;
    if (axis < 1)
      return fail("axis ", axis,
                  ", expected >= 1 (axis 0, the rows, cannot be split or "
                  "concatenated)");
    // The compiler states the blocks per row (params.outer): buffers are reused
    // by element count and reshapes alias, so their row_shape may belong to
    // another value.
    int64_t outer = split ? step_.get<abi::SplitParams>().outer
                          : step_.get<abi::ConcatParams>().outer;
    bool ok = outer >= 1 && w.rowElems % outer == 0;
    for (size_t i : pieces)
      ok = ok && r_.buffers_[arg(i).index()].rowElems % outer == 0;
    if (!ok)
      return fail("axis ", axis, ": ", outer,
                  " blocks per row do not divide every operand's width");
    step_.k = outer;
    for (size_t i : pieces)
      step_.chunks.push_back(r_.buffers_[arg(i).index()].rowElems / outer);
    return Status::ok();
  }

  Status checkKvAppend() {
    const fb::Cache *c = cache(0);
    const BufferInfo *values = buffer(3);
    KILN_RETURN_IF_ERROR(
        width(3, *values, c->width(),
              "the width of cache '" + c->name()->str() + "'"));
    uint32_t index = arg(0).index();
    if (std::find(r_.appended_.begin(), r_.appended_.end(), index) ==
        r_.appended_.end())
      r_.appended_.push_back(index);
    return Status::ok();
  }

  Status checkMla() {
    const BufferInfo *qn = buffer(0);
    const BufferInfo *qp = buffer(1);
    KILN_ASSIGN_OR_RETURN(const BoundWeight *kvb, matrix(2));
    const fb::Cache *c = cache(3);
    const BufferInfo *out = buffer(7);
    int64_t heads = step_.get<abi::MlaAttentionParams>().heads;
    if (heads < 1)
      return fail("params.heads ", heads, ", expected >= 1");
    KILN_RETURN_IF_ERROR(divides(0, *qn, heads, "params.heads"));
    KILN_RETURN_IF_ERROR(divides(1, *qp, heads, "params.heads"));
    cpu::MlaDims &m = step_.mla;
    m.heads = heads;
    m.nopeDim = qn->rowElems / heads;
    m.ropeDim = qp->rowElems / heads;
    m.latentDim = kvb->view.cols;
    if (kvb->view.rows % heads != 0 || kvb->view.rows / heads <= m.nopeDim)
      return fail(argLabel(2), ": kv_b '", kvb->name, "' has ", kvb->view.rows,
                  " rows, expected heads (", heads, ") x (nope dim ", m.nopeDim,
                  " + a value dim)");
    m.valueDim = kvb->view.rows / heads - m.nopeDim;
    if (c->width() != m.latentDim + m.ropeDim)
      return fail(argLabel(3), ": cache '", c->name()->str(), "' has width ",
                  c->width(), ", expected ", m.latentDim + m.ropeDim,
                  " (kv_b's latent dim ", m.latentDim, " + rope dim ",
                  m.ropeDim, ")");
    if (!isNone(6)) {
      const BufferInfo *topk = buffer(6);
      step_.k = topk->rowElems;
    }
    KILN_RETURN_IF_ERROR(
        width(7, *out, heads * m.valueDim, "heads x the value dim of kv_b"));
    return Status::ok();
  }

  Status checkIndexer() {
    const BufferInfo *q = buffer(0);
    const BufferInfo *w = buffer(1);
    const fb::Cache *c = cache(2);
    const BufferInfo *out = buffer(5);
    int64_t k = step_.get<abi::IndexerTopKParams>().k,
            heads = step_.get<abi::IndexerTopKParams>().heads;
    if (k < 1 || heads < 1)
      return fail("params.k ", k, " and params.heads ", heads,
                  ", expected >= 1");
    KILN_RETURN_IF_ERROR(divides(0, *q, heads, "params.heads"));
    step_.heads = heads;
    step_.headDim = q->rowElems / heads;
    step_.k = k;
    KILN_RETURN_IF_ERROR(width(1, *w, heads, "one weight per head"));
    if (c->width() != step_.headDim)
      return fail(argLabel(2), ": cache '", c->name()->str(), "' has width ",
                  c->width(), ", expected ", step_.headDim,
                  " (the query head dim)");
    KILN_RETURN_IF_ERROR(width(5, *out, k, "params.k"));
    return Status::ok();
  }

  Status checkGqa() {
    const BufferInfo *q = buffer(0);
    const fb::Cache *kc = cache(1);
    const fb::Cache *vc = cache(2);
    const BufferInfo *out = buffer(5);
    int64_t qHeads = step_.get<abi::GqaAttentionParams>().qHeads;
    if (qHeads < 1)
      return fail("params.q_heads ", qHeads, ", expected >= 1");
    KILN_RETURN_IF_ERROR(divides(0, *q, qHeads, "params.q_heads"));
    int64_t d = q->rowElems / qHeads;
    if (kc->width() % d != 0 || qHeads % (kc->width() / d) != 0)
      return fail(argLabel(1), ": cache '", kc->name()->str(), "' has width ",
                  kc->width(), ", expected kv_heads x ", d,
                  " (the head dim) with kv_heads dividing ", qHeads);
    int64_t kvHeads = kc->width() / d;
    if (vc->width() % kvHeads != 0)
      return fail(argLabel(2), ": cache '", vc->name()->str(), "' has width ",
                  vc->width(), ", expected a multiple of the ", kvHeads,
                  " kv heads");
    step_.heads = qHeads;
    step_.headDim = d;
    step_.kvHeads = kvHeads;
    step_.valueDim = vc->width() / kvHeads;
    KILN_RETURN_IF_ERROR(
        width(5, *out, qHeads * step_.valueDim, "q_heads x the value dim"));
    return Status::ok();
  }

  Status checkMoe() {
    const BufferInfo *x = buffer(0);
    int64_t e = 0, h = 0;
    KILN_RETURN_IF_ERROR(checkRouter(*x, e, h));
    KILN_ASSIGN_OR_RETURN(const BoundWeight *gate, stack(3));
    KILN_ASSIGN_OR_RETURN(const BoundWeight *up, stack(4));
    KILN_ASSIGN_OR_RETURN(const BoundWeight *down, stack(5));
    const BufferInfo *out = buffer(9);
    const int64_t i = gate->view.rows;
    KILN_RETURN_IF_ERROR(width(9, *out, h, "the hidden size"));
    // The stacks hold experts [offset, offset + local) of the e: all of
    // them, or one rank's share under expert parallelism.
    const int64_t offset = step_.get<abi::MoeParams>().expertOffset;
    const int64_t local = gate->view.count;
    if (offset < 0 || local < 1 || offset + local > e)
      return fail("params.expert_offset ", offset, ": the stacks' experts [",
                  offset, ", ", offset + local, ") must lie inside the ", e,
                  " the router chooses from");
    auto expectStack = [&](size_t a, const BoundWeight *w, int64_t n,
                           int64_t k) -> Status {
      if (w->view.count != local || w->view.rows != n || w->view.cols != k)
        return fail(argLabel(a), ": '", w->name, "' is [", w->view.count, ", ",
                    w->view.rows, ", ", w->view.cols, "], expected [", local,
                    ", ", n, ", ", k, "]");
      return Status::ok();
    };
    KILN_RETURN_IF_ERROR(expectStack(3, gate, i, h));
    KILN_RETURN_IF_ERROR(expectStack(4, up, i, h));
    KILN_RETURN_IF_ERROR(expectStack(5, down, h, i));
    int present = 0;
    for (size_t a = 6; a <= 8; ++a)
      present += !isNone(a);
    if (present != 0 && present != 3)
      return fail("args[6..8]: the shared expert needs all of shared_gate, "
                  "shared_up and shared_down, or none");
    if (present == 3) {
      KILN_ASSIGN_OR_RETURN(const BoundWeight *sg, matrix(6));
      KILN_ASSIGN_OR_RETURN(const BoundWeight *su, matrix(7));
      KILN_ASSIGN_OR_RETURN(const BoundWeight *sd, matrix(8));
      const int64_t is = sg->view.rows;
      auto expectMatrix = [&](size_t a, const BoundWeight *w, int64_t n,
                              int64_t k) -> Status {
        if (w->view.rows != n || w->view.cols != k)
          return fail(argLabel(a), ": '", w->name, "' is [", w->view.rows, ", ",
                      w->view.cols, "], expected [", n, ", ", k, "]");
        return Status::ok();
      };
      KILN_RETURN_IF_ERROR(expectMatrix(6, sg, is, h));
      KILN_RETURN_IF_ERROR(expectMatrix(7, su, is, h));
      KILN_RETURN_IF_ERROR(expectMatrix(8, sd, h, is));
    }
    const auto &params = step_.get<abi::MoeParams>();
    KILN_RETURN_IF_ERROR(
        checkRouting(e, params.topK, params.nGroup, params.topkGroup));
    if (abi::MoeRuleError rule = abi::checkMoeBlockSize(params.blockSize))
      return fail("params.", rule.field, " ", rule.message);
    cpu::MoeParams &p = step_.moe;
    p.normTopkProb = params.normTopkProb;
    p.blockSize = params.blockSize;
    p.routedScalingFactor = params.scale;
    p.expertOffset = offset;
    p.localExperts = local;
    return Status::ok();
  }

  /// moe and dispatch_rows: x (args[0]) against the router (args[1], [E,
  /// H]) and its bias (args[2], [E]). Sets `e` and `h`.
  Status checkRouter(const BufferInfo &x, int64_t &e, int64_t &h) {
    KILN_ASSIGN_OR_RETURN(const BoundWeight *router, matrix(1));
    KILN_ASSIGN_OR_RETURN(const BoundWeight *bias, vector(2));
    h = router->view.cols;
    e = router->view.rows;
    KILN_RETURN_IF_ERROR(width(0, x, h, "the router's K (hidden size)"));
    if (bias->length() != e)
      return fail(argLabel(2), ": bias '", bias->name, "' has length ",
                  bias->length(), ", expected ", e, " (the router's experts)");
    return Status::ok();
  }

  /// The selection rule (support/abi/MoeRules.h) over `e` experts, kept
  /// in the step's cpu::MoeParams.
  Status checkRouting(int64_t e, int64_t topK, int64_t nGroup,
                      int64_t topkGroup) {
    abi::MoeRouting routing{e, topK, nGroup, topkGroup};
    if (abi::MoeRuleError rule = abi::checkMoeRouting(routing))
      return fail("params.", rule.field, " ", rule.message);
    cpu::MoeParams &p = step_.moe;
    p.numExperts = e;
    p.topK = topK;
    p.nGroup = nGroup;
    p.topkGroup = topkGroup;
    return Status::ok();
  }

  Status checkDispatchRows() {
    int64_t e = 0, h = 0;
    KILN_RETURN_IF_ERROR(checkRouter(*buffer(0), e, h));
    const auto &params = step_.get<abi::DispatchRowsParams>();
    KILN_RETURN_IF_ERROR(
        checkRouting(e, params.topK, params.nGroup, params.topkGroup));
    if (params.expertsPerRank < 1 || e % params.expertsPerRank != 0)
      return fail("params.experts_per_rank ", params.expertsPerRank,
                  " does not divide the router's ", e, " experts");
    const int64_t words = routeWords(e / params.expertsPerRank);
    KILN_RETURN_IF_ERROR(
        width(4, *buffer(4), words, "a bit per rank, 32 to a word"));
    return Status::ok();
  }

  const fb::Artifact &meta_;
  const fb::Plan &plan_;
  const std::vector<BoundWeight> &weights_;
  ValidatedPlan &r_;
  std::string prefix_;
  Step step_;
};

Result<std::unique_ptr<ValidatedPlan>>
ValidatedPlan::create(const fb::Artifact &meta, uint32_t index,
                      const std::vector<BoundWeight> &weights) {
  std::unique_ptr<ValidatedPlan> out(new ValidatedPlan());
  const fb::Plan &plan = *meta.plans()->Get(index);
  out->name_ = plan.name()->str();
  PlanValidator validator(meta, plan, weights, *out);
  KILN_RETURN_IF_ERROR(validator.run());
  return out;
}

} // namespace kiln::engine
