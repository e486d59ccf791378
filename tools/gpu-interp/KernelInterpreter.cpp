//===- KernelInterpreter.cpp - Workgroups, memory and control flow --------===//
//
// runKernel, the lockstep executor (Interp::execBlock), memory accesses and
// the scf, gpu, memref and rocdl ops. Arithmetic and conversions are in
// InterpScalar.cpp, vector and amdgpu ops in InterpVector.cpp.
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/KernelInterpreter.h"

#include "tools/gpu-interp/InterpCore.h"

#include "passes/codegen/rocdl/MfmaLayout.h"
#include "passes/codegen/rocdl/RocdlCodegen.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/MLIRContext.h"
#include "llvm/Support/raw_ostream.h"

#include <new>

using namespace mlir;
using namespace kiln::rocdl;
using namespace kiln::rocdl::interp;
using namespace kiln::rocdl::interp::icore;

KernelArg KernelArg::ptr(void *p, size_t bytes) {
  KernelArg a;
  a.kind = Pointer;
  a.pointer = p;
  a.bytes = bytes;
  return a;
}

KernelArg KernelArg::i32(int32_t v) {
  KernelArg a;
  a.kind = I32;
  a.value = v;
  return a;
}

//===----------------------------------------------------------------------===//
// Core
//===----------------------------------------------------------------------===//

void kiln::rocdl::interp::icore::fail(const llvm::Twine &message) {
  throw InterpError{message.str()};
}

std::string kiln::rocdl::interp::icore::typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

std::string kiln::rocdl::interp::icore::describe(Operation &op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op.print(os, OpPrintingFlags().skipRegions().elideLargeElementsAttrs());
  return s;
}

bool kiln::rocdl::interp::icore::anyActive(const Mask &m) {
  for (uint8_t b : m)
    if (b)
      return true;
  return false;
}

Val &Interp::get(Value v) {
  auto it = env.find(v);
  if (it == env.end())
    fail("value used before it was computed (type " + typeString(v.getType()) +
         ")");
  return it->second;
}

Operation *Interp::execBlock(Block &block, const Mask &mask) {
  for (Operation &op : block) {
    if (&op == block.getTerminator() && op.hasTrait<OpTrait::IsTerminator>())
      return &op;
    execOp(op, mask);
  }
  fail("block without a terminator");
}

void Interp::execOp(Operation &op, const Mask &mask) {
  if (++steps > maxSteps)
    fail("step limit exceeded (" + llvm::Twine(maxSteps) +
         " ops per workgroup): the kernel does not terminate?");
  auto it = handlers->find(op.getName().getStringRef());
  if (it == handlers->end())
    fail("unsupported op '" + op.getName().getStringRef() + "'");
  it->second(*this, op, mask);
}

unsigned Interp::addView(View v) {
  mlir::Type elem = v.type.getElementType();
  v.scalar = ScalarCodec::of(elemType(elem));
  v.elemBits = uint64_t(v.scalar.bits) * numElems(elem);
  views.push_back(std::move(v));
  return unsigned(views.size() - 1);
}

unsigned Interp::newBuffer(size_t bytes, std::string what, uint8_t fill) {
  Buffer b;
  b.owned.assign(bytes, fill);
  b.data = b.owned.data();
  b.bytes = bytes;
  b.what = std::move(what);
  buffers.push_back(std::move(b));
  return unsigned(buffers.size() - 1);
}

std::string Interp::where(unsigned lane) const {
  return ("work-item " + llvm::Twine(lane) + " of workgroup (" +
          llvm::Twine(blockId[0]) + ", " + llvm::Twine(blockId[1]) + ", " +
          llvm::Twine(blockId[2]) + ")")
      .str();
}

void Interp::requireWholeWaves(Operation &op, const Mask &mask) {
  for (unsigned w = 0; w * kWaveSize < lanes; ++w) {
    unsigned on = 0, n = 0;
    for (unsigned l = w * kWaveSize; l < lanes && l < (w + 1) * kWaveSize;
         ++l, ++n)
      on += mask[l] ? 1 : 0;
    if (on != 0 && (on != n || n != kWaveSize))
      fail("'" + op.getName().getStringRef() + "' in wave " + llvm::Twine(w) +
           " needs all 64 lanes active, " + llvm::Twine(on) + " are");
  }
}

SmallVector<int64_t, 4> Interp::indices(Operation &op, unsigned first,
                                        unsigned n, unsigned lane) {
  IndexOperands &c = indexOperands_;
  if (c.op != &op || c.first != first || c.n != n || c.version != envVersion) {
    c.op = &op;
    c.first = first;
    c.n = n;
    c.version = envVersion;
    c.vals.clear();
    c.widths.clear();
    for (unsigned i = 0; i < n; ++i) {
      Value v = op.getOperand(first + i);
      c.vals.push_back(&get(v));
      c.widths.push_back(intWidth(v.getType()));
    }
  }
  SmallVector<int64_t, 4> out;
  for (unsigned i = 0; i < n; ++i)
    out.push_back(sext(c.vals[i]->at(lane), c.widths[i]));
  return out;
}

int64_t Interp::address(Operation &op, View &view, ArrayRef<int64_t> idx,
                        int64_t count, unsigned lane, bool write) {
  Buffer &buf = buffers[view.buffer];
  auto bad = [&](const llvm::Twine &why) {
    fail("'" + op.getName().getStringRef() + "' out of bounds: " + buf.what +
         " (" + typeString(view.type) + ") " + why + "; " + where(lane));
  };
  if (idx.size() != view.sizes.size())
    fail("'" + op.getName().getStringRef() + "': " + llvm::Twine(idx.size()) +
         " indices for a rank-" + llvm::Twine(view.sizes.size()) + " memref");
  int64_t linear = view.offset;
  for (size_t d = 0; d < idx.size(); ++d) {
    int64_t extent = d + 1 == idx.size() ? count : 1;
    if (idx[d] < 0 || idx[d] + extent > view.sizes[d])
      bad("index " + llvm::Twine(idx[d]) + " (+" + llvm::Twine(extent) +
          ") of dimension " + llvm::Twine(d) + " is outside its size " +
          llvm::Twine(view.sizes[d]));
    linear += idx[d] * view.strides[d];
  }
  uint64_t capacity = uint64_t(buf.bytes) * 8 / view.elemBits;
  if (linear < 0 || uint64_t(linear) + uint64_t(count) > capacity)
    bad("element index " + llvm::Twine(linear) +
        (count > 1 ? " (+" + llvm::Twine(count) + " elements)" : "") +
        " is outside its buffer of " + llvm::Twine(capacity) + " elements (" +
        llvm::Twine(buf.bytes) + " bytes)");
  if (write && buf.readOnly)
    fail("'" + op.getName().getStringRef() + "' writes the constant " +
         buf.what + "; " + where(lane));
  return linear;
}

void Interp::readElems(View &view, int64_t linear, Type scalar, unsigned count,
                       Word *out) {
  Type elem = view.type.getElementType();
  ScalarCodec c =
      scalar == view.scalar.type ? view.scalar : ScalarCodec::of(scalar);
  uint64_t first = uint64_t(linear) * numElems(elem);
  const uint8_t *data = buffers[view.buffer].data;
  for (unsigned i = 0; i < count; ++i)
    out[i] = c.decode(readBits(data, (first + i) * c.bits, c.bits));
}

void Interp::writeElems(View &view, int64_t linear, Type scalar, unsigned count,
                        const Word *in) {
  Type elem = view.type.getElementType();
  ScalarCodec c =
      scalar == view.scalar.type ? view.scalar : ScalarCodec::of(scalar);
  uint64_t first = uint64_t(linear) * numElems(elem);
  uint8_t *data = buffers[view.buffer].data;
  for (unsigned i = 0; i < count; ++i)
    writeBits(data, (first + i) * c.bits, c.bits, c.encode(in[i]));
}

//===----------------------------------------------------------------------===//
// scf
//===----------------------------------------------------------------------===//

namespace {

/// Copies the active lanes of `from` into `to`.
void merge(Val &to, const Val &from, const Mask &mask) {
  for (size_t l = 0; l < mask.size(); ++l)
    if (mask[l])
      for (unsigned e = 0; e < to.width; ++e)
        to.at(unsigned(l), e) = from.at(unsigned(l), e);
}

Mask andMask(const Mask &m, const Val &cond, bool want) {
  Mask out(m.size());
  for (size_t l = 0; l < m.size(); ++l)
    out[l] = m[l] && ((cond.at(unsigned(l)) & 1) != 0) == want;
  return out;
}

void scfFor(Interp &in, Operation &op, const Mask &mask) {
  auto loop = cast<scf::ForOp>(op);
  unsigned bits = intWidth(loop.getInductionVar().getType());
  bool isUnsigned = op.hasAttr("unsignedCmp");
  Val iv = in.get(loop.getLowerBound());
  Val ub = in.get(loop.getUpperBound());
  Val step = in.get(loop.getStep());
  SmallVector<Val> iters;
  for (Value v : loop.getInitArgs())
    iters.push_back(in.get(v));
  auto less = [&](unsigned l) {
    Word a = iv.at(l) & lowBits(bits), b = ub.at(l) & lowBits(bits);
    return isUnsigned ? a < b : sext(a, bits) < sext(b, bits);
  };
  Mask active(mask.size());
  for (unsigned l = 0; l < in.lanes; ++l) {
    active[l] = mask[l] && less(l);
    if (active[l] && sext(step.at(l), bits) <= 0)
      fail("scf.for with a non-positive step " +
           llvm::Twine(sext(step.at(l), bits)));
  }
  Block &body = *loop.getBody();
  while (anyActive(active)) {
    in.set(body.getArgument(0), Val(iv));
    for (size_t i = 0; i < iters.size(); ++i)
      in.set(body.getArgument(unsigned(i + 1)), Val(iters[i]));
    Operation *term = in.execBlock(body, active);
    for (size_t i = 0; i < iters.size(); ++i)
      merge(iters[i], in.get(term->getOperand(unsigned(i))), active);
    for (unsigned l = 0; l < in.lanes; ++l)
      if (active[l]) {
        iv.at(l) = (iv.at(l) + step.at(l)) & lowBits(bits);
        active[l] = less(l);
      }
  }
  for (size_t i = 0; i < iters.size(); ++i)
    in.set(op.getResult(unsigned(i)), std::move(iters[i]));
}

void scfIf(Interp &in, Operation &op, const Mask &mask) {
  auto ifOp = cast<scf::IfOp>(op);
  const Val &cond = in.get(ifOp.getCondition());
  Mask thenMask = andMask(mask, cond, true);
  Mask elseMask = andMask(mask, cond, false);
  SmallVector<Val> results;
  for (Value r : op.getResults())
    results.push_back(in.make(r.getType()));
  auto run = [&](Region &region, const Mask &m) {
    if (region.empty() || !anyActive(m))
      return;
    Operation *term = in.execBlock(region.front(), m);
    for (size_t i = 0; i < results.size(); ++i)
      merge(results[i], in.get(term->getOperand(unsigned(i))), m);
  };
  run(ifOp.getThenRegion(), thenMask);
  run(ifOp.getElseRegion(), elseMask);
  for (size_t i = 0; i < results.size(); ++i)
    in.set(op.getResult(unsigned(i)), std::move(results[i]));
}

void scfWhile(Interp &in, Operation &op, const Mask &mask) {
  auto loop = cast<scf::WhileOp>(op);
  SmallVector<Val> args, results;
  for (Value v : loop.getInits())
    args.push_back(in.get(v));
  for (Value r : op.getResults())
    results.push_back(in.make(r.getType()));
  Mask active = mask;
  Block &before = loop.getBefore().front(), &after = loop.getAfter().front();
  while (anyActive(active)) {
    for (size_t i = 0; i < args.size(); ++i)
      in.set(before.getArgument(unsigned(i)), Val(args[i]));
    Operation *cond = in.execBlock(before, active);
    const Val &c = in.get(cond->getOperand(0));
    Mask exit = andMask(active, c, false), cont = andMask(active, c, true);
    SmallVector<Val> passed;
    for (unsigned i = 1; i < cond->getNumOperands(); ++i)
      passed.push_back(in.get(cond->getOperand(i)));
    for (size_t i = 0; i < results.size(); ++i)
      merge(results[i], passed[i], exit);
    active = cont;
    if (!anyActive(active))
      break;
    for (size_t i = 0; i < passed.size(); ++i)
      in.set(after.getArgument(unsigned(i)), std::move(passed[i]));
    Operation *yield = in.execBlock(after, active);
    for (size_t i = 0; i < args.size(); ++i)
      merge(args[i], in.get(yield->getOperand(unsigned(i))), active);
  }
  for (size_t i = 0; i < results.size(); ++i)
    in.set(op.getResult(unsigned(i)), std::move(results[i]));
}

void scfExecuteRegion(Interp &in, Operation &op, const Mask &mask) {
  Region &region = op.getRegion(0);
  if (!region.hasOneBlock())
    fail("scf.execute_region with more than one block is not supported");
  Operation *term = in.execBlock(region.front(), mask);
  SmallVector<Val> results;
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    results.push_back(in.get(term->getOperand(i)));
  for (unsigned i = 0; i < op.getNumResults(); ++i)
    in.set(op.getResult(i), std::move(results[i]));
}

void scfIndexSwitch(Interp &in, Operation &op, const Mask &mask) {
  auto sw = cast<scf::IndexSwitchOp>(op);
  const Val &arg = in.get(sw.getArg());
  SmallVector<Val> results;
  for (Value r : op.getResults())
    results.push_back(in.make(r.getType()));
  Mask rest = mask;
  auto run = [&](Region &region, const Mask &m) {
    if (!anyActive(m))
      return;
    Operation *term = in.execBlock(region.front(), m);
    for (size_t i = 0; i < results.size(); ++i)
      merge(results[i], in.get(term->getOperand(unsigned(i))), m);
  };
  ArrayRef<int64_t> cases = sw.getCases();
  for (size_t c = 0; c < cases.size(); ++c) {
    Mask m(mask.size());
    for (unsigned l = 0; l < in.lanes; ++l)
      if (rest[l] && int64_t(arg.at(l)) == cases[c]) {
        m[l] = 1;
        rest[l] = 0;
      }
    run(sw.getCaseRegions()[c], m);
  }
  run(sw.getDefaultRegion(), rest);
  for (size_t i = 0; i < results.size(); ++i)
    in.set(op.getResult(unsigned(i)), std::move(results[i]));
}

//===----------------------------------------------------------------------===//
// gpu and rocdl
//===----------------------------------------------------------------------===//

int dimOf(Operation &op) {
  if (auto d = op.getAttrOfType<gpu::DimensionAttr>("dimension"))
    return int(d.getValue());
  fail("'" + op.getName().getStringRef() + "' without a dimension");
}

/// Sets a per-lane integer result computed by f(lane).
template <class F> void perLane(Interp &in, Operation &op, F f) {
  Value r = op.getResult(0);
  Val v = in.make(r.getType());
  unsigned bits = intWidth(r.getType());
  for (unsigned l = 0; l < in.lanes; ++l)
    v.at(l) = Word(f(l)) & lowBits(bits);
  in.set(r, std::move(v));
}

int64_t tidDim(Interp &in, unsigned lane, int d) {
  int64_t x = lane % in.block[0], y = lane / in.block[0] % in.block[1],
          z = lane / (in.block[0] * in.block[1]);
  return d == 0 ? x : d == 1 ? y : z;
}

void gpuThreadId(Interp &in, Operation &op, const Mask &) {
  int d = dimOf(op);
  perLane(in, op, [&](unsigned l) { return tidDim(in, l, d); });
}
void gpuBlockId(Interp &in, Operation &op, const Mask &) {
  int d = dimOf(op);
  perLane(in, op, [&](unsigned) { return in.blockId[size_t(d)]; });
}
void gpuBlockDim(Interp &in, Operation &op, const Mask &) {
  int d = dimOf(op);
  perLane(in, op, [&](unsigned) { return in.block[size_t(d)]; });
}
void gpuGridDim(Interp &in, Operation &op, const Mask &) {
  int d = dimOf(op);
  perLane(in, op, [&](unsigned) { return in.grid[size_t(d)]; });
}
void gpuGlobalId(Interp &in, Operation &op, const Mask &) {
  int d = dimOf(op);
  perLane(in, op, [&](unsigned l) {
    return in.blockId[size_t(d)] * in.block[size_t(d)] + tidDim(in, l, d);
  });
}
void gpuLaneId(Interp &in, Operation &op, const Mask &) {
  perLane(in, op, [&](unsigned l) { return l % kWaveSize; });
}
void gpuSubgroupId(Interp &in, Operation &op, const Mask &) {
  perLane(in, op, [&](unsigned l) { return l / kWaveSize; });
}
void gpuSubgroupSize(Interp &in, Operation &op, const Mask &) {
  perLane(in, op, [&](unsigned) { return kWaveSize; });
}
void gpuNumSubgroups(Interp &in, Operation &op, const Mask &) {
  perLane(in, op, [&](unsigned) { return ceilDiv(in.lanes, kWaveSize); });
}

void gpuBarrier(Interp &in, Operation &op, const Mask &mask) {
  // Lockstep execution already orders every access before the barrier
  // before every access after it; a barrier some threads skip hangs.
  for (unsigned l = 0; l < in.lanes; ++l)
    if (!mask[l])
      fail("'" + op.getName().getStringRef() +
           "' under divergent control flow: " + in.where(l) +
           " does not reach it");
}
void noOp(Interp &, Operation &, const Mask &) {}

/// Reads lane `src` (workgroup-linear) of `v` for `lane`, which must be an
/// active lane of the same wave.
const Word *readLane(Interp &in, Operation &op, const Val &v, const Mask &mask,
                     unsigned lane, int64_t src) {
  int64_t wave = lane / kWaveSize;
  if (src < wave * kWaveSize || src >= (wave + 1) * kWaveSize ||
      src >= int64_t(in.lanes) || !mask[size_t(src)])
    fail("'" + op.getName().getStringRef() + "': " + in.where(lane) +
         " reads lane " + llvm::Twine(src % kWaveSize) + " of its wave" +
         ", which is not an active lane");
  return &v.w[size_t(src) * v.width];
}

void gpuShuffle(Interp &in, Operation &op, const Mask &mask) {
  auto sh = cast<gpu::ShuffleOp>(op);
  const Val &v = in.get(sh.getValue());
  const Val &off = in.get(sh.getOffset());
  const Val &wid = in.get(sh.getWidth());
  Val res = in.make(sh.getValue().getType());
  Val valid = in.make(sh.getValid().getType());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    int64_t lane = l % kWaveSize, base = l - lane;
    int64_t o = int64_t(int32_t(off.at(l))), w = int64_t(int32_t(wid.at(l)));
    if (w <= 0 || w > kWaveSize)
      fail("gpu.shuffle width " + llvm::Twine(w) + " outside [1, 64]");
    int64_t seg = (w & (w - 1)) == 0 ? lane & ~(w - 1) : 0;
    int64_t src = 0;
    switch (sh.getMode()) {
    case gpu::ShuffleMode::XOR:
      src = lane ^ o;
      break;
    case gpu::ShuffleMode::DOWN:
      src = lane + o;
      break;
    case gpu::ShuffleMode::UP:
      src = lane - o;
      break;
    case gpu::ShuffleMode::IDX:
      src = o;
      break;
    }
    bool ok = src >= seg && src < seg + w;
    const Word *from = ok ? readLane(in, op, v, mask, l, base + src)
                          : &v.w[size_t(l) * v.width];
    for (unsigned e = 0; e < res.width; ++e)
      res.at(l, e) = from[e];
    valid.at(l) = ok;
  }
  in.set(sh.getShuffleResult(), std::move(res));
  in.set(sh.getValid(), std::move(valid));
}

void rocdlId(Interp &in, Operation &op, const Mask &) {
  StringRef name = op.getName().getStringRef();
  int d = name.back() - 'x';
  bool item = name.contains("workitem");
  perLane(in, op, [&](unsigned l) {
    return item ? tidDim(in, l, d) : in.blockId[size_t(d)];
  });
}

void rocdlReadLane(Interp &in, Operation &op, const Mask &mask) {
  const Val &v = in.get(op.getOperand(0));
  bool first = op.getNumOperands() == 1;
  Val res = in.make(op.getResult(0).getType());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    unsigned base = l / kWaveSize * kWaveSize;
    int64_t src = base;
    if (first) {
      while (src < base + kWaveSize && !mask[size_t(src)])
        ++src;
    } else {
      src = base + int64_t(in.get(op.getOperand(1)).at(l) % kWaveSize);
    }
    const Word *from = readLane(in, op, v, mask, l, src);
    for (unsigned e = 0; e < res.width; ++e)
      res.at(l, e) = from[e];
  }
  in.set(op.getResult(0), std::move(res));
}

void rocdlBpermute(Interp &in, Operation &op, const Mask &mask) {
  const Val &idx = in.get(op.getOperand(0));
  const Val &v = in.get(op.getOperand(1));
  Val res = in.make(op.getResult(0).getType());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    int64_t src = l / kWaveSize * kWaveSize + (idx.at(l) / 4) % kWaveSize;
    res.at(l) = readLane(in, op, v, mask, l, src)[0];
  }
  in.set(op.getResult(0), std::move(res));
}

void rocdlBallot(Interp &in, Operation &op, const Mask &mask) {
  const Val &v = in.get(op.getOperand(0));
  Val res = in.make(op.getResult(0).getType());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    unsigned base = l / kWaveSize * kWaveSize;
    Word bits = 0;
    for (unsigned s = base; s < base + kWaveSize && s < in.lanes; ++s)
      if (mask[s] && (v.at(s) & 1))
        bits |= Word(1) << (s - base);
    res.at(l) = bits & lowBits(intWidth(op.getResult(0).getType()));
  }
  in.set(op.getResult(0), std::move(res));
}

void rocdlMbcnt(Interp &in, Operation &op, const Mask &) {
  bool hi = op.getName().getStringRef().ends_with("hi");
  const Val &m = in.get(op.getOperand(0));
  const Val &add = in.get(op.getOperand(1));
  perLane(in, op, [&](unsigned l) {
    unsigned lane = l % kWaveSize;
    unsigned below = hi ? (lane > 32 ? lane - 32 : 0) : std::min(lane, 32u);
    uint32_t bits = uint32_t(m.at(l)) & uint32_t(lowBits(below));
    return uint32_t(add.at(l)) + uint32_t(__builtin_popcount(bits));
  });
}

} // namespace

void kiln::rocdl::interp::icore::registerControlOps(HandlerMap &map) {
  registerMemoryOps(map);
  map["scf.for"] = scfFor;
  map["scf.if"] = scfIf;
  map["scf.while"] = scfWhile;
  map["scf.execute_region"] = scfExecuteRegion;
  map["scf.index_switch"] = scfIndexSwitch;
  map["gpu.thread_id"] = gpuThreadId;
  map["gpu.block_id"] = gpuBlockId;
  map["gpu.block_dim"] = gpuBlockDim;
  map["gpu.grid_dim"] = gpuGridDim;
  map["gpu.global_id"] = gpuGlobalId;
  map["gpu.lane_id"] = gpuLaneId;
  map["gpu.subgroup_id"] = gpuSubgroupId;
  map["gpu.subgroup_size"] = gpuSubgroupSize;
  map["gpu.num_subgroups"] = gpuNumSubgroups;
  map["gpu.barrier"] = gpuBarrier;
  map["amdgpu.lds_barrier"] = gpuBarrier;
  map["rocdl.s.barrier"] = gpuBarrier;
  map["rocdl.barrier"] = gpuBarrier;
  map["amdgpu.sched_barrier"] = noOp;
  map["rocdl.sched.barrier"] = noOp;
  map["rocdl.s.waitcnt"] = noOp;
  map["gpu.shuffle"] = gpuShuffle;
  for (const char *n :
       {"rocdl.workitem.id.x", "rocdl.workitem.id.y", "rocdl.workitem.id.z",
        "rocdl.workgroup.id.x", "rocdl.workgroup.id.y", "rocdl.workgroup.id.z"})
    map[n] = rocdlId;
  map["rocdl.readlane"] = rocdlReadLane;
  map["rocdl.readfirstlane"] = rocdlReadLane;
  map["rocdl.ds_bpermute"] = rocdlBpermute;
  map["rocdl.ballot"] = rocdlBallot;
  map["rocdl.mbcnt.lo"] = rocdlMbcnt;
  map["rocdl.mbcnt.hi"] = rocdlMbcnt;
}

//===----------------------------------------------------------------------===//
// runKernel
//===----------------------------------------------------------------------===//

static const HandlerMap &allHandlers() {
  static const HandlerMap map = [] {
    HandlerMap m;
    registerControlOps(m);
    registerScalarOps(m);
    registerVectorOps(m);
    return m;
  }();
  return map;
}

static std::string runKernelImpl(ModuleOp module, StringRef symbol,
                                 std::array<int64_t, 3> grid,
                                 ArrayRef<KernelArg> args) {
  gpu::GPUFuncOp fn;
  Operation *kernelModule = nullptr;
  module.walk([&](gpu::GPUModuleOp gm) {
    if (fn)
      return;
    if (auto f = gm.lookupSymbol<gpu::GPUFuncOp>(symbol)) {
      fn = f;
      kernelModule = gm;
    }
  });
  if (!fn)
    fail("no gpu.func @" + symbol + " in any gpu.module");
  std::optional<DenseI32ArrayAttr> known = fn.getKnownBlockSizeAttr();
  if (!known || known->size() != 3)
    fail("@" + symbol + " has no known_block_size");
  Interp in;
  in.kernelModule = kernelModule;
  in.handlers = &allHandlers();
  for (int d = 0; d < 3; ++d) {
    in.block[size_t(d)] = (*known)[size_t(d)];
    in.grid[size_t(d)] = grid[size_t(d)];
    if (grid[size_t(d)] < 0 || in.block[size_t(d)] <= 0)
      fail("bad grid or block size");
  }
  int64_t lanes = in.block[0] * in.block[1] * in.block[2];
  if (lanes > 1024)
    fail("block of " + llvm::Twine(lanes) + " work-items (at most 1024)");
  in.lanes = unsigned(lanes);
  in.maxSteps = 200'000'000;

  FunctionType ft = fn.getFunctionType();
  if (ft.getNumInputs() != args.size())
    fail("@" + symbol + " takes " + llvm::Twine(ft.getNumInputs()) +
         " arguments, got " + llvm::Twine(args.size()));
  Block &entry = fn.getBody().front();
  Val fullVal;
  SmallVector<std::pair<Value, Val>> argVals;
  for (size_t i = 0; i < args.size(); ++i) {
    Type t = ft.getInput(unsigned(i));
    const KernelArg &a = args[i];
    std::string name = ("argument " + llvm::Twine(i)).str();
    Val v(in.lanes, 1);
    if (auto mt = dyn_cast<MemRefType>(t)) {
      if (a.kind != KernelArg::Pointer)
        fail(name + ": expected a pointer for " + typeString(t) +
             ", got an i32");
      if (!a.pointer && a.bytes != 0)
        fail(name + ": null pointer with " + llvm::Twine(a.bytes) + " bytes");
      Buffer b;
      b.data = static_cast<uint8_t *>(a.pointer);
      b.bytes = a.bytes;
      b.argNo = int(i);
      b.what = name;
      in.buffers.push_back(std::move(b));
      unsigned view =
          in.addView(identityView(unsigned(in.buffers.size() - 1), mt));
      for (unsigned l = 0; l < in.lanes; ++l)
        v.at(l) = view;
    } else if (isa<IntegerType, IndexType>(t)) {
      if (a.kind != KernelArg::I32)
        fail(name + ": expected an i32 for " + typeString(t) +
             ", got a pointer");
      unsigned bits = intWidth(t);
      for (unsigned l = 0; l < in.lanes; ++l)
        v.at(l) = Word(int64_t(a.value)) & lowBits(bits);
    } else {
      fail(name + ": unsupported argument type " + typeString(t));
    }
    argVals.push_back({entry.getArgument(unsigned(i)), std::move(v)});
  }
  size_t baseBuffers = in.buffers.size(), baseViews = in.views.size();
  Mask full(in.lanes, 1);
  for (int64_t z = 0; z < grid[2]; ++z)
    for (int64_t y = 0; y < grid[1]; ++y)
      for (int64_t x = 0; x < grid[0]; ++x) {
        in.blockId = {x, y, z};
        in.env.clear();
        ++in.envVersion;
        in.steps = 0;
        in.buffers.resize(baseBuffers);
        in.views.resize(baseViews);
        in.globals.clear();
        in.wgGlobals.clear();
        for (auto &[value, v] : argVals)
          in.set(value, Val(v));
        unsigned wgIndex = 0;
        for (BlockArgument attr : fn.getWorkgroupAttributions()) {
          auto mt = cast<MemRefType>(attr.getType());
          unsigned b = in.newBuffer(
              memrefBytes(mt),
              ("workgroup buffer " + llvm::Twine(wgIndex++)).str(), 0xFF);
          unsigned view = in.addView(identityView(b, mt));
          Val v(in.lanes, 1);
          for (unsigned l = 0; l < in.lanes; ++l)
            v.at(l) = view;
          in.set(attr, std::move(v));
        }
        for (BlockArgument attr : fn.getPrivateAttributions()) {
          auto mt = cast<MemRefType>(attr.getType());
          Val v(in.lanes, 1);
          for (unsigned l = 0; l < in.lanes; ++l) {
            unsigned b = in.newBuffer(memrefBytes(mt),
                                      "private buffer of " + in.where(l), 0xFF);
            v.at(l) = in.addView(identityView(b, mt));
          }
          in.set(attr, std::move(v));
        }
        Operation *term = in.execBlock(entry, full);
        if (!isa<gpu::ReturnOp>(term))
          fail("kernel body ends in '" + term->getName().getStringRef() + "'");
      }
  return "";
}

std::string interp::runKernel(ModuleOp module, StringRef symbol,
                              std::array<int64_t, 3> grid,
                              ArrayRef<KernelArg> args) {
  try {
    return runKernelImpl(module, symbol, grid, args);
  } catch (const InterpError &e) {
    return e.message.empty() ? "error" : e.message;
  } catch (const std::bad_alloc &) {
    return "out of memory";
  }
}

std::string interp::runKernel(const KernelSpec &spec,
                              std::array<int64_t, 3> grid,
                              ArrayRef<KernelArg> args) {
  std::string error = spec.validate();
  if (!error.empty())
    return "invalid spec: " + error;
  MLIRContext context;
  context.printOpOnDiagnostic(false);
  std::string diag;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    diag += d.str();
    return success();
  });
  OwningOpRef<ModuleOp> module = buildKernels(context, {spec});
  if (!module)
    return "buildKernels failed: " + diag;
  return runKernel(*module, spec.symbol(), grid, args);
}
