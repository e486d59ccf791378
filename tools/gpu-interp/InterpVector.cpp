//===- InterpVector.cpp - vector and amdgpu ops ---------------------------===//
//
// Vectors are flattened row-major (Val::width elements per lane). The
// amdgpu matrix ops follow the lane layouts of MfmaLayout.h / AMDGPU.md
// section 3: for an MxNxK MFMA (M = N = 16 or 32, one block) lane l
// supplies row l % M of A and of B (B is read N-major) and the K run
// [laneK * (l / M), +laneK), laneK = K / (64 / M) (FP8 in the f8f6f4
// forms: two halves, Operand below); the result lane l holds
// C[4 * (l / 16) + i][l % 16] (16x16) or C[8 * (i / 4) + 4 * (l / 32) +
// i % 4][l % 32] (32x32).
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/InterpCore.h"

#include "passes/codegen/rocdl/MfmaLayout.h"

#include "mlir/Dialect/AMDGPU/IR/AMDGPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/AffineMap.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln::rocdl;
using namespace kiln::rocdl::interp::icore;

namespace {

SmallVector<int64_t> shapeOf(Type t) {
  if (auto v = dyn_cast<VectorType>(t))
    return SmallVector<int64_t>(v.getShape());
  return {};
}

/// Row-major strides of `shape` (in elements).
SmallVector<int64_t> stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> s(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i)
    s[size_t(i)] = s[size_t(i) + 1] * shape[size_t(i) + 1];
  return s;
}

void requireRank1(Operation &op, Type t) {
  if (shapeOf(t).size() != 1)
    fail("'" + op.getName().getStringRef() + "' on " + typeString(t) +
         " (only 1-D vectors are supported)");
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

void vectorLoad(Interp &in, Operation &op, const Mask &mask) {
  auto load = cast<vector::LoadOp>(op);
  Type t = load.getType();
  requireRank1(op, t);
  const Val &m = in.get(load.getBase());
  Type memElem = load.getMemRefType().getElementType();
  bool whole = memElem == t; // memref of vectors: one element
  if (!whole && isa<VectorType>(memElem))
    fail("vector.load of " + typeString(t) + " from a memref of " +
         typeString(memElem));
  Val res = in.make(t);
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    View &view = in.viewOf(m, l);
    int64_t lin = in.address(op, view, in.indices(op, 1, view.sizes.size(), l),
                             whole ? 1 : res.width, l, false);
    in.readElems(view, lin, elemType(t), res.width, &res.at(l));
  }
  in.set(load.getResult(), std::move(res));
}

void vectorStore(Interp &in, Operation &op, const Mask &mask) {
  auto store = cast<vector::StoreOp>(op);
  Type t = store.getValueToStore().getType();
  requireRank1(op, t);
  const Val &v = in.get(store.getValueToStore());
  const Val &m = in.get(store.getBase());
  Type memElem = store.getMemRefType().getElementType();
  bool whole = memElem == t;
  if (!whole && isa<VectorType>(memElem))
    fail("vector.store of " + typeString(t) + " to a memref of " +
         typeString(memElem));
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    View &view = in.viewOf(m, l);
    int64_t lin = in.address(op, view, in.indices(op, 2, view.sizes.size(), l),
                             whole ? 1 : v.width, l, true);
    in.writeElems(view, lin, elemType(t), v.width, v.lanePtr(l));
  }
}

/// Masked element-by-element access of a 1-D vector along the last dim.
/// `read`: result <- memory where enabled, else `other`.
void maskedAccess(Interp &in, Operation &op, const Mask &mask, Value base,
                  unsigned firstIndex, Value vecMask, Value data, Value result,
                  bool read, bool boundsToPadding) {
  Type vt = read ? result.getType() : data.getType();
  requireRank1(op, vt);
  const Val &m = in.get(base);
  unsigned n = numElems(vt);
  const Val *vm = vecMask ? &in.get(vecMask) : nullptr;
  const Val *d = data ? &in.get(data) : nullptr;
  Val res = read ? in.make(vt) : Val();
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    View &view = in.viewOf(m, l);
    SmallVector<int64_t, 4> idx =
        in.indices(op, firstIndex, view.sizes.size(), l);
    for (unsigned e = 0; e < n; ++e) {
      bool on = !vm || (vm->width == 1 ? vm->at(l) : vm->at(l, e)) & 1;
      SmallVector<int64_t, 4> at = idx;
      at.back() += e;
      if (on && boundsToPadding &&
          (at.back() < 0 || at.back() >= view.sizes.back()))
        on = false;
      if (read) {
        if (!on) {
          res.at(l, e) = d->width == 1 ? d->at(l) : d->at(l, e);
          continue;
        }
        int64_t lin = in.address(op, view, at, 1, l, false);
        in.readElems(view, lin, elemType(vt), 1, &res.at(l, e));
      } else if (on) {
        int64_t lin = in.address(op, view, at, 1, l, true);
        in.writeElems(view, lin, elemType(vt), 1, d->lanePtr(l) + e);
      }
    }
  }
  if (read)
    in.set(result, std::move(res));
}

void vectorMaskedLoad(Interp &in, Operation &op, const Mask &mask) {
  auto ml = cast<vector::MaskedLoadOp>(op);
  maskedAccess(in, op, mask, ml.getBase(), 1, ml.getMask(), ml.getPassThru(),
               ml.getResult(), true, false);
}

void vectorMaskedStore(Interp &in, Operation &op, const Mask &mask) {
  auto ms = cast<vector::MaskedStoreOp>(op);
  maskedAccess(in, op, mask, ms.getBase(), 1, ms.getMask(),
               ms.getValueToStore(), Value(), false, false);
}

void checkTransferMap(Operation &op, AffineMap map, unsigned rank) {
  if (map.getNumResults() != 1 || !map.isMinorIdentity() ||
      map.getNumDims() != rank)
    fail("'" + op.getName().getStringRef() +
         "' with a non-minor-identity permutation map");
}

void vectorTransferRead(Interp &in, Operation &op, const Mask &mask) {
  auto tr = cast<vector::TransferReadOp>(op);
  auto mt = dyn_cast<MemRefType>(tr.getBase().getType());
  if (!mt)
    fail("vector.transfer_read from a tensor");
  checkTransferMap(op, tr.getPermutationMap(), unsigned(mt.getRank()));
  // The padding is a scalar: broadcast through maskedAccess's pass-through.
  maskedAccess(in, op, mask, tr.getBase(), 1, tr.getMask(), tr.getPadding(),
               tr.getResult(), true, !tr.isDimInBounds(0));
}

void vectorTransferWrite(Interp &in, Operation &op, const Mask &mask) {
  auto tw = cast<vector::TransferWriteOp>(op);
  auto mt = dyn_cast<MemRefType>(tw.getBase().getType());
  if (!mt || tw->getNumResults() != 0)
    fail("vector.transfer_write to a tensor");
  checkTransferMap(op, tw.getPermutationMap(), unsigned(mt.getRank()));
  maskedAccess(in, op, mask, tw.getBase(), 2, tw.getMask(), tw.getVector(),
               Value(), false, !tw.isDimInBounds(0));
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

void vectorBroadcast(Interp &in, Operation &op, const Mask &mask) {
  Value r = op.getResult(0);
  SmallVector<int64_t> rs = shapeOf(r.getType()),
                       ss = shapeOf(op.getOperand(0).getType());
  const Val &src = in.get(op.getOperand(0));
  Val res = in.make(r.getType());
  // Source dims align with the trailing result dims; size-1 dims stretch.
  SmallVector<int64_t> rStr = stridesOf(rs), sStr = stridesOf(ss);
  size_t lead = rs.size() - ss.size();
  SmallVector<unsigned> map(res.width);
  for (unsigned i = 0; i < res.width; ++i) {
    int64_t s = 0;
    for (size_t d = 0; d < ss.size(); ++d) {
      int64_t idx = (i / rStr[lead + d]) % rs[lead + d];
      s += (ss[d] == 1 ? 0 : idx) * sStr[d];
    }
    map[i] = unsigned(s);
  }
  for (unsigned l = 0; l < in.lanes; ++l)
    if (mask[l])
      for (unsigned i = 0; i < res.width; ++i)
        res.at(l, i) = src.at(l, map[i]);
  in.set(r, std::move(res));
}

/// Linear offset and extent of a (static or dynamic) position in a vector.
std::pair<int64_t, int64_t> positionOf(Interp &in, Operation &op,
                                       ArrayRef<int64_t> shape,
                                       ArrayRef<OpFoldResult> pos,
                                       unsigned lane) {
  SmallVector<int64_t> str = stridesOf(shape);
  int64_t off = 0;
  for (size_t d = 0; d < pos.size(); ++d) {
    int64_t p;
    if (auto a = dyn_cast<Attribute>(pos[d]))
      p = cast<IntegerAttr>(a).getInt();
    else {
      Value v = cast<Value>(pos[d]);
      p = sext(in.get(v).at(lane), intWidth(v.getType()));
    }
    if (p < 0 || p >= shape[d])
      fail("'" + op.getName().getStringRef() + "' position " + llvm::Twine(p) +
           " outside dimension " + llvm::Twine(d) + " of size " +
           llvm::Twine(shape[d]));
    off += p * str[d];
  }
  int64_t extent = pos.empty() ? 1 : str[pos.size() - 1];
  if (pos.empty())
    for (int64_t s : shape)
      extent *= s;
  return {off, extent};
}

void vectorExtract(Interp &in, Operation &op, const Mask &mask) {
  auto ex = cast<vector::ExtractOp>(op);
  SmallVector<int64_t> shape = shapeOf(ex.getSource().getType());
  SmallVector<OpFoldResult> pos = ex.getMixedPosition();
  const Val &src = in.get(ex.getSource());
  Val res = in.make(ex.getType());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    auto [off, n] = positionOf(in, op, shape, pos, l);
    for (unsigned e = 0; e < res.width; ++e)
      res.at(l, e) = src.at(l, unsigned(off) + e);
  }
  in.set(ex.getResult(), std::move(res));
}

void vectorInsert(Interp &in, Operation &op, const Mask &mask) {
  auto ins = cast<vector::InsertOp>(op);
  SmallVector<int64_t> shape = shapeOf(ins.getDest().getType());
  SmallVector<OpFoldResult> pos = ins.getMixedPosition();
  const Val &v = in.get(ins.getValueToStore());
  Val res = in.get(ins.getDest());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    auto [off, n] = positionOf(in, op, shape, pos, l);
    for (unsigned e = 0; e < v.width; ++e)
      res.at(l, unsigned(off) + e) = v.at(l, e);
  }
  in.set(ins.getResult(), std::move(res));
}

void vectorFromElements(Interp &in, Operation &op, const Mask &mask) {
  Value r = op.getResult(0);
  Val res = in.make(r.getType());
  for (unsigned e = 0; e < op.getNumOperands(); ++e) {
    const Val &v = in.get(op.getOperand(e));
    for (unsigned l = 0; l < in.lanes; ++l)
      if (mask[l])
        res.at(l, e) = v.at(l);
  }
  in.set(r, std::move(res));
}

void vectorToElements(Interp &in, Operation &op, const Mask &mask) {
  const Val &v = in.get(op.getOperand(0));
  SmallVector<Val> outs;
  for (unsigned e = 0; e < op.getNumResults(); ++e) {
    Val r = in.make(op.getResult(e).getType());
    for (unsigned l = 0; l < in.lanes; ++l)
      if (mask[l])
        r.at(l) = v.at(l, e);
    outs.push_back(std::move(r));
  }
  for (unsigned e = 0; e < op.getNumResults(); ++e)
    in.set(op.getResult(e), std::move(outs[e]));
}

void vectorShuffle(Interp &in, Operation &op, const Mask &mask) {
  auto sh = cast<vector::ShuffleOp>(op);
  const Val &a = in.get(sh.getV1()), &b = in.get(sh.getV2());
  SmallVector<int64_t> as = shapeOf(sh.getV1().getType());
  int64_t sub = 1; // elements per leading-dim slice
  for (size_t d = 1; d < as.size(); ++d)
    sub *= as[d];
  int64_t na = as.empty() ? 1 : as[0];
  Val res = in.make(sh.getResult().getType());
  ArrayRef<int64_t> pick = sh.getMask();
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    for (size_t i = 0; i < pick.size(); ++i) {
      int64_t p = pick[i];
      bool first = p < na;
      int64_t q = first ? p : p - na;
      if (p < 0)
        q = 0, first = true; // poison index
      const Val &src = first ? a : b;
      for (int64_t e = 0; e < sub; ++e)
        res.at(l, unsigned(i * sub + e)) =
            src.width == 1 ? src.at(l) : src.at(l, unsigned(q * sub + e));
    }
  }
  in.set(sh.getResult(), std::move(res));
}

void vectorBitcast(Interp &in, Operation &op, const Mask &mask) {
  Type st = op.getOperand(0).getType(), rt = op.getResult(0).getType();
  SmallVector<int64_t> ss = shapeOf(st), rs = shapeOf(rt);
  Type se = elemType(st), re = elemType(rt);
  unsigned sb = storageBits(se), rb = storageBits(re);
  if (isa<IntegerType>(se) && intWidth(se) == 1)
    sb = 1;
  if (isa<IntegerType>(re) && intWidth(re) == 1)
    rb = 1;
  int64_t sInner = ss.back(), rInner = rs.back();
  int64_t rows = numElems(st) / sInner;
  const Val &src = in.get(op.getOperand(0));
  Val res = in.make(rt);
  std::vector<uint8_t> bits(size_t(sInner * sb + 7) / 8 + 8);
  // Widths of 4 or whole bytes move as fields; i1 bit by bit.
  bool fields = sb != 1 && rb != 1;
  ScalarCodec sc = ScalarCodec::of(se), rc = ScalarCodec::of(re);
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(bits.begin(), bits.end(), 0);
      for (int64_t i = 0; i < sInner; ++i) {
        uint64_t v = sc.encode(src.at(l, unsigned(r * sInner + i)));
        if (fields) {
          writeBits(bits.data(), uint64_t(i) * sb, sb, v);
          continue;
        }
        for (unsigned b = 0; b < sb; ++b)
          if ((v >> b) & 1) {
            uint64_t pos = uint64_t(i) * sb + b;
            bits[pos / 8] |= uint8_t(1u << (pos % 8));
          }
      }
      for (int64_t i = 0; i < rInner; ++i) {
        uint64_t v = 0;
        if (fields)
          v = readBits(bits.data(), uint64_t(i) * rb, rb);
        else
          for (unsigned b = 0; b < rb; ++b) {
            uint64_t pos = uint64_t(i) * rb + b;
            v |= uint64_t((bits[pos / 8] >> (pos % 8)) & 1) << b;
          }
        res.at(l, unsigned(r * rInner + i)) = rc.decode(v);
      }
    }
  }
  in.set(op.getResult(0), std::move(res));
}

void vectorShapeCast(Interp &in, Operation &op, const Mask &) {
  in.set(op.getResult(0), Val(in.get(op.getOperand(0))));
}

void vectorStep(Interp &in, Operation &op, const Mask &) {
  Val res = in.make(op.getResult(0).getType());
  for (unsigned l = 0; l < in.lanes; ++l)
    for (unsigned e = 0; e < res.width; ++e)
      res.at(l, e) = e;
  in.set(op.getResult(0), std::move(res));
}

void vectorCreateMask(Interp &in, Operation &op, const Mask &mask) {
  Type t = op.getResult(0).getType();
  requireRank1(op, t);
  Val res = in.make(t);
  bool constant = op.getName().getStringRef() == "vector.constant_mask";
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    int64_t n = constant ? cast<vector::ConstantMaskOp>(op).getMaskDimSizes()[0]
                         : sext(in.get(op.getOperand(0)).at(l), 64);
    for (unsigned e = 0; e < res.width; ++e)
      res.at(l, e) = int64_t(e) < n;
  }
  in.set(op.getResult(0), std::move(res));
}

void vectorStridedSlice(Interp &in, Operation &op, const Mask &mask) {
  bool extract = op.getName().getStringRef() == "vector.extract_strided_slice";
  auto ints = [&](StringRef name) {
    SmallVector<int64_t> out;
    if (auto arr = op.getAttrOfType<ArrayAttr>(name))
      for (Attribute a : arr)
        out.push_back(cast<IntegerAttr>(a).getInt());
    return out;
  };
  SmallVector<int64_t> offsets = ints("offsets"), strides = ints("strides");
  for (int64_t s : strides)
    if (s != 1)
      fail("'" + op.getName().getStringRef() + "' with non-unit strides");
  Type big = extract ? op.getOperand(0).getType() : op.getResult(0).getType();
  Type small = extract ? op.getResult(0).getType() : op.getOperand(0).getType();
  SmallVector<int64_t> bs = shapeOf(big), ss = shapeOf(small);
  size_t lead = bs.size() - ss.size(); // insert: small may have lower rank
  SmallVector<int64_t> sizes(ss);
  if (extract) {
    sizes = ints("sizes");
    for (size_t d = sizes.size(); d < bs.size(); ++d)
      sizes.push_back(bs[d]);
    lead = 0;
  }
  // Map each element of the small vector to one of the big one.
  SmallVector<int64_t> bStr = stridesOf(bs), sStr = stridesOf(ss);
  unsigned n = numElems(small);
  SmallVector<unsigned> map(n);
  for (unsigned i = 0; i < n; ++i) {
    int64_t b = 0;
    for (size_t d = 0; d < bs.size(); ++d) {
      int64_t idx = 0;
      if (d >= lead) {
        size_t sd = d - lead;
        idx = (i / sStr[sd]) % ss[sd];
      }
      b += (idx + (d < offsets.size() ? offsets[d] : 0)) * bStr[d];
    }
    map[i] = unsigned(b);
  }
  const Val &src = in.get(op.getOperand(0));
  Val res = extract ? in.make(small) : in.get(op.getOperand(1));
  for (unsigned l = 0; l < in.lanes; ++l)
    if (mask[l])
      for (unsigned i = 0; i < n; ++i) {
        if (extract)
          res.at(l, i) = src.at(l, map[i]);
        else
          res.at(l, map[i]) = src.at(l, i);
      }
  in.set(op.getResult(0), std::move(res));
}

void vectorTranspose(Interp &in, Operation &op, const Mask &mask) {
  auto tr = cast<vector::TransposeOp>(op);
  SmallVector<int64_t> ss = shapeOf(tr.getVector().getType()),
                       rs = shapeOf(tr.getType());
  ArrayRef<int64_t> perm = tr.getPermutation();
  SmallVector<int64_t> sStr = stridesOf(ss), rStr = stridesOf(rs);
  const Val &src = in.get(tr.getVector());
  Val res = in.make(tr.getType());
  for (unsigned i = 0; i < res.width; ++i) {
    int64_t s = 0;
    for (size_t d = 0; d < rs.size(); ++d)
      s += ((i / rStr[d]) % rs[d]) * sStr[size_t(perm[d])];
    for (unsigned l = 0; l < in.lanes; ++l)
      if (mask[l])
        res.at(l, i) = src.at(l, unsigned(s));
  }
  in.set(tr.getResult(), std::move(res));
}

void vectorInterleave(Interp &in, Operation &op, const Mask &mask) {
  Type t = op.getOperand(0).getType();
  requireRank1(op, t);
  const Val &a = in.get(op.getOperand(0)), &b = in.get(op.getOperand(1));
  Val res = in.make(op.getResult(0).getType());
  for (unsigned l = 0; l < in.lanes; ++l)
    if (mask[l])
      for (unsigned i = 0; i < a.width; ++i) {
        res.at(l, 2 * i) = a.at(l, i);
        res.at(l, 2 * i + 1) = b.at(l, i);
      }
  in.set(op.getResult(0), std::move(res));
}

void vectorDeinterleave(Interp &in, Operation &op, const Mask &mask) {
  requireRank1(op, op.getOperand(0).getType());
  const Val &s = in.get(op.getOperand(0));
  Val a = in.make(op.getResult(0).getType()), b = a;
  for (unsigned l = 0; l < in.lanes; ++l)
    if (mask[l])
      for (unsigned i = 0; i < a.width; ++i) {
        a.at(l, i) = s.at(l, 2 * i);
        b.at(l, i) = s.at(l, 2 * i + 1);
      }
  in.set(op.getResult(0), std::move(a));
  in.set(op.getResult(1), std::move(b));
}

//===----------------------------------------------------------------------===//
// Arithmetic on vectors
//===----------------------------------------------------------------------===//

/// One step of a reduction of kind `kind` in type `t`.
Word combine(vector::CombiningKind kind, Type t, Word a, Word b) {
  using K = vector::CombiningKind;
  if (isa<FloatType>(t)) {
    double x = asF(a), y = asF(b), r = 0;
    bool wide = t.isF64();
    switch (kind) {
    case K::ADD:
      r = wide ? x + y : double(float(x) + float(y));
      break;
    case K::MUL:
      r = wide ? x * y : double(float(x) * float(y));
      break;
    case K::MAXNUMF:
      r = std::fmax(x, y);
      break;
    case K::MINNUMF:
      r = std::fmin(x, y);
      break;
    case K::MAXIMUMF:
      r = std::isnan(x) || std::isnan(y) ? NAN
          : x == y                       ? (std::signbit(x) ? y : x)
                                         : std::max(x, y);
      break;
    case K::MINIMUMF:
      r = std::isnan(x) || std::isnan(y) ? NAN
          : x == y                       ? (std::signbit(x) ? x : y)
                                         : std::min(x, y);
      break;
    default:
      fail("integer reduction kind on " + typeString(t));
    }
    return fromF(roundToFloat(t, r));
  }
  unsigned n = intWidth(t);
  Word r = 0;
  switch (kind) {
  case K::ADD:
    r = a + b;
    break;
  case K::MUL:
    r = a * b;
    break;
  case K::AND:
    r = a & b;
    break;
  case K::OR:
    r = a | b;
    break;
  case K::XOR:
    r = a ^ b;
    break;
  case K::MINUI:
    r = std::min(a, b);
    break;
  case K::MAXUI:
    r = std::max(a, b);
    break;
  case K::MINSI:
    r = sext(a, n) < sext(b, n) ? a : b;
    break;
  case K::MAXSI:
    r = sext(a, n) > sext(b, n) ? a : b;
    break;
  default:
    fail("float reduction kind on " + typeString(t));
  }
  return r & lowBits(n);
}

void vectorReduction(Interp &in, Operation &op, const Mask &mask) {
  auto red = cast<vector::ReductionOp>(op);
  Type t = red.getType();
  const Val &v = in.get(red.getVector());
  const Val *acc = red.getAcc() ? &in.get(red.getAcc()) : nullptr;
  Val res = in.make(t);
  // In element order (LLVM's ordered reduction without reassoc).
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    Word r = acc ? acc->at(l) : v.at(l, 0);
    for (unsigned e = acc ? 0 : 1; e < v.width; ++e)
      r = combine(red.getKind(), t, r, v.at(l, e));
    res.at(l) = r;
  }
  in.set(red.getDest(), std::move(res));
}

//===----------------------------------------------------------------------===//
// amdgpu
//===----------------------------------------------------------------------===//

/// Result layout: (row, col) of accumulator element `i` of `lane`.
std::pair<int64_t, int64_t> resultPos(int64_t m, int64_t lane, int64_t i) {
  if (m == 16)
    return {resultRow(lane, i), resultCol(lane)};
  return {8 * (i / 4) + 4 * (lane / 32) + i % 4, lane % 32};
}

/// c += d (an m x m product, row-major, which `product` fills for the wave
/// starting at lane `base`) for every wave of the active lanes.
void accumulate(Interp &in, Operation &op, const Mask &mask, int64_t m,
                const std::function<void(unsigned base,
                                         std::vector<double> &prod)> &product,
                Value cIn, Value result) {
  const Val &c = in.get(cIn);
  Type ct = elemType(cIn.getType());
  if (c.width != unsigned(m * m / kWaveSize))
    fail("'" + op.getName().getStringRef() + "' accumulator " +
         typeString(cIn.getType()) + " does not fit " + llvm::Twine(m) + "x" +
         llvm::Twine(m));
  Val res = c;
  std::vector<double> prod(size_t(m * m));
  for (unsigned base = 0; base < in.lanes; base += kWaveSize) {
    if (!mask[base])
      continue;
    product(base, prod);
    for (unsigned lane = 0; lane < kWaveSize; ++lane)
      for (unsigned r = 0; r < res.width; ++r) {
        auto [row, col] = resultPos(m, lane, r);
        double p = prod[size_t(row * m + col)];
        Word &out = res.at(base + lane, r);
        if (isa<IntegerType>(ct))
          out = Word(int64_t(sext(c.at(base + lane, r), 32) + int64_t(p))) &
                lowBits(32);
        else
          out = fromF(roundToFloat(ct, asF(c.at(base + lane, r)) + p));
      }
  }
  in.set(result, std::move(res));
}

/// Operand values: element `k` of the m x K matrix row `row` (A; or column
/// of B), read from the lane that supplies it. With `split` (the FP8
/// operands of the f8f6f4 MFMAs) the lane's run is two halves of laneK / 2:
/// elements [0, laneK / 2) are K [laneK / 2 * g, +laneK / 2) of the first
/// half of K, the rest the same of the second half, g = lane / m.
struct Operand {
  const Val *v;
  Type elem;
  int64_t m, laneK;
  bool split = false;
  int64_t k = 0;              // the instruction's K
  std::vector<double> values; // [row][kk] of the wave unpack() read
  bool isFloat = true;
  unsigned intBits = 0;

  double at(unsigned base, int64_t row, int64_t kk) const {
    int64_t group = kk / laneK, e = kk % laneK;
    if (split) {
      int64_t half = laneK / 2, inHalf = kk % (k / 2);
      group = inHalf / half;
      e = kk / (k / 2) * half + inHalf % half;
    }
    unsigned lane = unsigned(base + row + m * group);
    Word w = v->width == 1 ? v->at(lane) : v->at(lane, unsigned(e));
    return isFloat ? asF(w) : double(sext(w, intBits));
  }
  /// The wave's m x k values into `values`, once per instruction.
  const double *unpack(unsigned base) {
    isFloat = isa<FloatType>(elem);
    intBits = isFloat ? 0 : intWidth(elem);
    values.resize(size_t(m * k));
    for (int64_t row = 0; row < m; ++row)
      for (int64_t kk = 0; kk < k; ++kk)
        values[size_t(row * k + kk)] = at(base, row, kk);
    return values.data();
  }
};

/// out[q] = sum over kk in [from, to), in order, of a[kk] * b[q * k + kk]
/// for the four B rows q = 0..3 (independent sums, so they overlap).
void dot4(const double *a, const double *b, int64_t k, int64_t from, int64_t to,
          double out[4]) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int64_t kk = from; kk < to; ++kk) {
    double x = a[kk];
    s0 += x * b[kk];
    s1 += x * b[k + kk];
    s2 += x * b[2 * k + kk];
    s3 += x * b[3 * k + kk];
  }
  out[0] = s0;
  out[1] = s1;
  out[2] = s2;
  out[3] = s3;
}

void amdgpuMfma(Interp &in, Operation &op, const Mask &mask) {
  auto mf = cast<amdgpu::MFMAOp>(op);
  int64_t m = mf.getM(), n = mf.getN(), k = mf.getK();
  if (m != n || (m != 16 && m != 32) || mf.getBlocks() != 1 ||
      mf.getCbsz() != 0 || mf.getAbid() != 0 ||
      mf.getBlgp() != amdgpu::MFMAPermB::none)
    fail("amdgpu.mfma " + llvm::Twine(m) + "x" + llvm::Twine(n) + "x" +
         llvm::Twine(k) + " with blocks/cbsz/abid/blgp is not modelled");
  Type at = mf.getSourceA().getType(), bt = mf.getSourceB().getType();
  Type ae = elemType(at);
  int64_t groups = kWaveSize / m, laneK = k / groups;
  if (numElems(at) != laneK || numElems(bt) != laneK)
    fail("amdgpu.mfma " + llvm::Twine(m) + "x" + llvm::Twine(n) + "x" +
         llvm::Twine(k) + ": operands " + typeString(at) + " do not hold " +
         llvm::Twine(laneK) + " elements per lane");
  // The f8f6f4 forms (K 64 / 128, gfx950): FP8 operands only, both E4M3FN
  // or E5M2 (the FP6/FP4 runs are not split the same way).
  bool f8f6f4 = isa<FloatType>(ae) && storageBits(ae) <= 8 && k >= 64;
  if (f8f6f4 && (storageBits(ae) != 8 || storageBits(elemType(bt)) != 8))
    fail("amdgpu.mfma with " + typeString(at) + " x " + typeString(bt) +
         " (f8f6f4 FP6/FP4 operand layout) is not modelled");
  if (elemType(mf.getDestC().getType()).isF64())
    fail("amdgpu.mfma on f64 is not modelled");
  in.requireWholeWaves(op, mask);
  Operand a{&in.get(mf.getSourceA()), ae, m, laneK, f8f6f4, k};
  Operand b{&in.get(mf.getSourceB()), elemType(bt), n, laneK, f8f6f4, k};
  double sa = mf.getNegateA() ? -1 : 1, sb = mf.getNegateB() ? -1 : 1;
  accumulate(
      in, op, mask, m,
      [&](unsigned base, std::vector<double> &prod) {
        const double *av = a.unpack(base), *bv = b.unpack(base);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < m; j += 4) {
            double sum[4];
            dot4(av + i * k, bv + j * k, k, 0, k, sum);
            for (int q = 0; q < 4; ++q)
              prod[size_t(i * m + j + q)] = sum[q] * sa * sb;
          }
      },
      mf.getDestC(), mf.getDestD());
}

void amdgpuScaledMfma(Interp &in, Operation &op, const Mask &mask) {
  auto mf = cast<amdgpu::ScaledMFMAOp>(op);
  int64_t m = mf.getM(), n = mf.getN(), k = mf.getK();
  Type ae = elemType(mf.getSourceA().getType()),
       be = elemType(mf.getSourceB().getType());
  if (!isa<Float4E2M1FNType>(ae) || !isa<Float4E2M1FNType>(be))
    fail("amdgpu.scaled_mfma with " + typeString(mf.getSourceA().getType()) +
         " x " + typeString(mf.getSourceB().getType()) +
         " is not modelled (FP4 only: the FP8/FP6 lane layouts differ)");
  if (m != n || !((m == 16 && k == 128) || (m == 32 && k == 64)))
    fail("amdgpu.scaled_mfma shape not modelled");
  in.requireWholeWaves(op, mask);
  int64_t laneK = k / (kWaveSize / m); // 32: one MX block per lane
  Operand a{&in.get(mf.getSourceA()), ae, m, laneK, false, k};
  Operand b{&in.get(mf.getSourceB()), be, n, laneK, false, k};
  const Val &sa = in.get(mf.getScalesA()), &sb = in.get(mf.getScalesB());
  unsigned ia = mf.getScalesIdxA(), ib = mf.getScalesIdxB();
  auto scale = [&](const Val &s, unsigned idx, unsigned lane) {
    return asF(s.width == 1 ? s.at(lane) : s.at(lane, idx));
  };
  accumulate(
      in, op, mask, m,
      [&](unsigned base, std::vector<double> &prod) {
        const double *av = a.unpack(base), *bv = b.unpack(base);
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < m; j += 4) {
            double sum[4] = {0, 0, 0, 0};
            for (int64_t blk = 0; blk < k / laneK; ++blk) {
              double part[4];
              dot4(av + i * k, bv + j * k, k, blk * laneK, (blk + 1) * laneK,
                   part);
              unsigned la = unsigned(base + i + m * blk);
              for (int q = 0; q < 4; ++q) {
                unsigned lb = unsigned(base + j + q + n * blk);
                sum[q] += part[q] * scale(sa, ia, la) * scale(sb, ib, lb);
              }
            }
            for (int q = 0; q < 4; ++q)
              prod[size_t(i * m + j + q)] = sum[q];
          }
      },
      mf.getDestC(), mf.getDestD());
}

int scaleExp(double scale) {
  float f = float(scale);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return int((bits >> 23) & 0xFF);
}

void amdgpuPackedScaledTrunc(Interp &in, Operation &op, const Mask &mask) {
  // v_cvt_scalef32_pk_{fp4,fp8,bf8}_f32: each source / 2^(exponent of
  // scale - 127), rounded to nearest even (FP4 saturates at 6), into
  // elements [2 * index, +2) of `existing` (zeros when absent).
  auto tr = cast<amdgpu::PackedScaledTruncOp>(op);
  Type rt = tr.getRes().getType(), re = elemType(rt);
  const Val &src = in.get(tr.getSource());
  const Val &sc = in.get(tr.getScale());
  Val res = tr.getExisting() ? in.get(tr.getExisting()) : in.make(rt);
  unsigned index = tr.getIndex();
  if (2 * index + 1 >= res.width)
    fail("amdgpu.packed_scaled_trunc index " + llvm::Twine(index) +
         " outside " + typeString(rt));
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    int e = scaleExp(asF(sc.at(l)));
    for (unsigned i = 0; i < 2; ++i) {
      double x = i < src.width ? asF(src.at(l, i)) : 0.0;
      res.at(l, 2 * index + i) =
          fromF(roundToFloat(re, std::ldexp(x, 127 - e)));
    }
  }
  in.set(tr.getRes(), std::move(res));
}

void amdgpuPackedTrunc2xFp8(Interp &in, Operation &op, const Mask &mask) {
  // v_cvt_pk_{fp8,bf8}_f32: sourceA, sourceB rounded to nearest even into
  // elements [2 * wordIndex, +2) of `existing` (zeros when absent).
  auto tr = cast<amdgpu::PackedTrunc2xFp8Op>(op);
  Type rt = tr.getRes().getType(), re = elemType(rt);
  const Val &a = in.get(tr.getSourceA());
  const Val *bv = tr.getSourceB() ? &in.get(tr.getSourceB()) : nullptr;
  Val res = tr.getExisting() ? in.get(tr.getExisting()) : in.make(rt);
  unsigned word = tr.getWordIndex();
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    res.at(l, 2 * word) = fromF(roundToFloat(re, asF(a.at(l))));
    res.at(l, 2 * word + 1) =
        fromF(roundToFloat(re, bv ? asF(bv->at(l)) : 0.0));
  }
  in.set(tr.getRes(), std::move(res));
}

void amdgpuScaledExtPacked(Interp &in, Operation &op, const Mask &mask) {
  auto ex = cast<amdgpu::ScaledExtPackedOp>(op);
  Type rt = ex.getRes().getType(), re = elemType(rt);
  const Val &src = in.get(ex.getSource());
  const Val &sc = in.get(ex.getScale());
  unsigned index = ex.getIndex();
  Val res = in.make(rt);
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    int e = scaleExp(asF(sc.at(l)));
    for (unsigned i = 0; i < 2; ++i) {
      unsigned s = 2 * index + i;
      double x = s < src.width ? asF(src.at(l, s)) : 0.0;
      res.at(l, i) = fromF(roundToFloat(re, std::ldexp(x, e - 127)));
    }
  }
  in.set(ex.getRes(), std::move(res));
}

} // namespace

void kiln::rocdl::interp::icore::registerVectorOps(HandlerMap &map) {
  map["vector.load"] = vectorLoad;
  map["vector.store"] = vectorStore;
  map["vector.maskedload"] = vectorMaskedLoad;
  map["vector.maskedstore"] = vectorMaskedStore;
  map["vector.transfer_read"] = vectorTransferRead;
  map["vector.transfer_write"] = vectorTransferWrite;
  map["vector.broadcast"] = vectorBroadcast;
  map["vector.splat"] = vectorBroadcast;
  map["vector.extract"] = vectorExtract;
  map["vector.insert"] = vectorInsert;
  map["vector.from_elements"] = vectorFromElements;
  map["vector.to_elements"] = vectorToElements;
  map["vector.shuffle"] = vectorShuffle;
  map["vector.bitcast"] = vectorBitcast;
  map["vector.shape_cast"] = vectorShapeCast;
  map["vector.step"] = vectorStep;
  map["vector.create_mask"] = vectorCreateMask;
  map["vector.constant_mask"] = vectorCreateMask;
  map["vector.extract_strided_slice"] = vectorStridedSlice;
  map["vector.insert_strided_slice"] = vectorStridedSlice;
  map["vector.transpose"] = vectorTranspose;
  map["vector.interleave"] = vectorInterleave;
  map["vector.deinterleave"] = vectorDeinterleave;
  map["vector.reduction"] = vectorReduction;
  map["vector.fma"] = [](Interp &in, Operation &op, const Mask &m) {
    // Same as math.fma (InterpScalar.cpp); re-dispatch by name.
    in.handlers->lookup("math.fma")(in, op, m);
  };
  map["amdgpu.mfma"] = amdgpuMfma;
  map["amdgpu.scaled_mfma"] = amdgpuScaledMfma;
  map["amdgpu.packed_scaled_trunc"] = amdgpuPackedScaledTrunc;
  map["amdgpu.packed_trunc_2xfp8"] = amdgpuPackedTrunc2xFp8;
  map["amdgpu.scaled_ext_packed"] = amdgpuScaledExtPacked;
}
