//===- InterpMemory.cpp - memref ops of the kernel interpreter ------------===//
//
// Loads, stores, private and global buffers, views and atomics. Every
// access goes through Interp::address, which checks it against the view's
// static shape and the buffer's real size.
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/InterpCore.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

#include <cmath>

using namespace mlir;
using namespace kiln::rocdl::interp::icore;

namespace {

//===----------------------------------------------------------------------===//
// memref
//===----------------------------------------------------------------------===//

} // namespace

View kiln::rocdl::interp::icore::identityView(unsigned buffer,
                                              MemRefType type) {
  View v;
  v.buffer = buffer;
  v.type = type;
  SmallVector<int64_t> strides;
  int64_t offset = 0;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) || !type.hasStaticShape())
    fail("memref " + typeString(type) +
         " needs a static shape and static strides");
  for (int64_t s : strides)
    if (ShapedType::isDynamic(s))
      fail("memref " + typeString(type) + " has dynamic strides");
  v.offset = offset;
  v.sizes.assign(type.getShape().begin(), type.getShape().end());
  v.strides.assign(strides.begin(), strides.end());
  return v;
}

size_t kiln::rocdl::interp::icore::memrefBytes(MemRefType type) {
  Type e = type.getElementType();
  return size_t((uint64_t(type.getNumElements()) * storageBits(elemType(e)) *
                     numElems(e) +
                 7) /
                8);
}

namespace {

void memrefLoad(Interp &in, Operation &op, const Mask &mask) {
  auto load = cast<memref::LoadOp>(op);
  const Val &m = in.get(load.getMemRef());
  Type t = load.getType();
  Val res = in.make(t);
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    View &view = in.viewOf(m, l);
    int64_t lin = in.address(op, view, in.indices(op, 1, view.sizes.size(), l),
                             1, l, false);
    in.readElems(view, lin, elemType(t), res.width, &res.at(l));
  }
  in.set(load.getResult(), std::move(res));
}

void memrefStore(Interp &in, Operation &op, const Mask &mask) {
  auto store = cast<memref::StoreOp>(op);
  const Val &v = in.get(store.getValue());
  const Val &m = in.get(store.getMemRef());
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    View &view = in.viewOf(m, l);
    int64_t lin = in.address(op, view, in.indices(op, 2, view.sizes.size(), l),
                             1, l, true);
    in.writeElems(view, lin, elemType(store.getValue().getType()), v.width,
                  v.lanePtr(l));
  }
}

void memrefAlloca(Interp &in, Operation &op, const Mask &mask) {
  auto type = cast<MemRefType>(op.getResult(0).getType());
  if (op.getNumOperands() != 0)
    fail("'" + op.getName().getStringRef() + "' with dynamic sizes");
  Val res(in.lanes, 1);
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    unsigned b = in.newBuffer(memrefBytes(type),
                              "private buffer of " + in.where(l), 0xFF);
    res.at(l) = in.addView(identityView(b, type));
  }
  in.set(op.getResult(0), std::move(res));
}

void memrefGetGlobal(Interp &in, Operation &op, const Mask &) {
  auto get = cast<memref::GetGlobalOp>(op);
  auto global = dyn_cast_or_null<memref::GlobalOp>(
      SymbolTable::lookupSymbolIn(in.kernelModule, get.getNameAttr()));
  if (!global)
    fail("memref.get_global of unknown @" + get.getName());
  MemRefType type = global.getType();
  bool perGroup = false;
  if (auto space =
          dyn_cast_or_null<gpu::AddressSpaceAttr>(type.getMemorySpace()))
    perGroup = space.getValue() == gpu::AddressSpace::Workgroup;
  auto &table = perGroup ? in.wgGlobals : in.globals;
  auto it = table.find(get.getName());
  unsigned buffer;
  if (it != table.end()) {
    buffer = it->second;
  } else {
    buffer =
        in.newBuffer(memrefBytes(type), "global @" + get.getName().str(), 0xFF);
    in.buffers[buffer].readOnly = global.getConstant();
    std::optional<Attribute> initial = global.getInitialValue();
    if (auto init = dyn_cast_or_null<DenseElementsAttr>(
            initial ? *initial : Attribute())) {
      View v = identityView(buffer, type);
      Type scalar = elemType(type.getElementType());
      int64_t i = 0;
      if (isa<FloatType>(scalar)) {
        for (APFloat f : init.getValues<APFloat>()) {
          bool lost;
          f.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
          Word w = fromF(f.convertToDouble());
          in.writeElems(v, i++, scalar, 1, &w);
        }
      } else {
        for (APInt a : init.getValues<APInt>()) {
          Word w = a.getZExtValue() & lowBits(intWidth(scalar));
          in.writeElems(v, i++, scalar, 1, &w);
        }
      }
    } else if (initial && !isa<UnitAttr>(*initial)) {
      fail("memref.global @" + get.getName() +
           ": unsupported initial value kind");
    }
    table[get.getName()] = buffer;
  }
  Val res(in.lanes, 1);
  unsigned view = in.addView(identityView(buffer, type));
  for (unsigned l = 0; l < in.lanes; ++l)
    res.at(l) = view;
  in.set(op.getResult(0), std::move(res));
}

void forwardFirst(Interp &in, Operation &op, const Mask &) {
  in.set(op.getResult(0), Val(in.get(op.getOperand(0))));
}

void memrefCast(Interp &in, Operation &op, const Mask &mask) {
  const Val &src = in.get(op.getOperand(0));
  auto type = dyn_cast<MemRefType>(op.getResult(0).getType());
  if (!type)
    fail("'" + op.getName().getStringRef() + "' to an unranked memref");
  Val res = src;
  for (unsigned l = 0; l < in.lanes; ++l)
    if (mask[l]) {
      View v = in.viewOf(src, l);
      v.type = type;
      res.at(l) = in.addView(std::move(v));
    }
  in.set(op.getResult(0), std::move(res));
}

void memrefSubview(Interp &in, Operation &op, const Mask &mask) {
  auto sv = cast<memref::SubViewOp>(op);
  const Val &src = in.get(sv.getSource());
  auto type = cast<MemRefType>(sv.getType());
  Val res = src;
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    const View &s = in.viewOf(src, l);
    auto value = [&](OpFoldResult r) -> int64_t {
      if (auto a = dyn_cast<Attribute>(r))
        return cast<IntegerAttr>(a).getInt();
      Value v = cast<Value>(r);
      return sext(in.get(v).at(l), intWidth(v.getType()));
    };
    SmallVector<OpFoldResult> offs = sv.getMixedOffsets(),
                              sizes = sv.getMixedSizes(),
                              strides = sv.getMixedStrides();
    View v;
    v.buffer = s.buffer;
    v.type = type;
    v.offset = s.offset;
    llvm::SmallBitVector dropped = sv.getDroppedDims();
    for (size_t d = 0; d < offs.size(); ++d) {
      int64_t o = value(offs[d]), n = value(sizes[d]), st = value(strides[d]);
      if (o < 0 || n < 0 || (n > 0 && o + (n - 1) * st >= s.sizes[d]))
        fail("memref.subview outside its source: dimension " + llvm::Twine(d) +
             " offset " + llvm::Twine(o) + " size " + llvm::Twine(n) + "; " +
             in.where(l));
      v.offset += o * s.strides[d];
      if (!dropped.test(d)) {
        v.sizes.push_back(n);
        v.strides.push_back(s.strides[d] * st);
      }
    }
    res.at(l) = in.addView(std::move(v));
  }
  in.set(op.getResult(0), std::move(res));
}

void memrefAtomicRmw(Interp &in, Operation &op, const Mask &mask) {
  auto rmw = cast<memref::AtomicRMWOp>(op);
  const Val &v = in.get(rmw.getValue());
  const Val &m = in.get(rmw.getMemref());
  Type t = rmw.getValue().getType();
  unsigned bits = isa<FloatType>(t) ? 0 : intWidth(t);
  Val res = in.make(t);
  // Work-items apply their updates one after another, in id order.
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    View &view = in.viewOf(m, l);
    int64_t lin = in.address(op, view, in.indices(op, 2, view.sizes.size(), l),
                             1, l, true);
    Word old;
    in.readElems(view, lin, t, 1, &old);
    Word x = v.at(l), r = 0;
    double a = asF(old), b = asF(x);
    float af = float(a), bf = float(b);
    auto fl = [&](double d) { return fromF(roundToFloat(t, d)); };
    using K = arith::AtomicRMWKind;
    switch (rmw.getKind()) {
    case K::addf:
      r = fl(isa<Float64Type>(t) ? a + b : double(af + bf));
      break;
    case K::mulf:
      r = fl(isa<Float64Type>(t) ? a * b : double(af * bf));
      break;
    case K::maximumf:
      r = fl(std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b));
      break;
    case K::minimumf:
      r = fl(std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b));
      break;
    case K::maxnumf:
      r = fl(std::fmax(a, b));
      break;
    case K::minnumf:
      r = fl(std::fmin(a, b));
      break;
    case K::assign:
      r = x;
      break;
    case K::addi:
      r = old + x;
      break;
    case K::muli:
      r = old * x;
      break;
    case K::ori:
      r = old | x;
      break;
    case K::andi:
      r = old & x;
      break;
    case K::xori:
      r = old ^ x;
      break;
    case K::maxs:
      r = sext(old, bits) > sext(x, bits) ? old : x;
      break;
    case K::mins:
      r = sext(old, bits) < sext(x, bits) ? old : x;
      break;
    case K::maxu:
      r = std::max(old, x);
      break;
    case K::minu:
      r = std::min(old, x);
      break;
    }
    if (bits)
      r &= lowBits(bits);
    in.writeElems(view, lin, t, 1, &r);
    res.at(l) = old;
  }
  in.set(rmw.getResult(), std::move(res));
}

} // namespace

void kiln::rocdl::interp::icore::registerMemoryOps(HandlerMap &map) {
  map["memref.dealloc"] = [](Interp &, Operation &, const Mask &) {};
  map["memref.load"] = memrefLoad;
  map["memref.store"] = memrefStore;
  map["memref.alloca"] = memrefAlloca;
  map["memref.alloc"] = memrefAlloca;
  map["memref.get_global"] = memrefGetGlobal;
  map["memref.cast"] = memrefCast;
  map["memref.assume_alignment"] = forwardFirst;
  map["memref.subview"] = memrefSubview;
  map["memref.atomic_rmw"] = memrefAtomicRmw;
}
