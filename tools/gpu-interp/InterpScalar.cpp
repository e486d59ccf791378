//===- InterpScalar.cpp - Types, float encodings, arith/math/intrinsics ---===//
//
// Elementwise semantics: integers wrap at their width (index is 64 bits);
// f32 ops are computed in float, f64 in double, other float types in float
// and rounded to the type (round to nearest even). Transcendentals use libm
// in double, rounded to the result type (see KernelInterpreter.h).
//
//===----------------------------------------------------------------------===//

#include "tools/gpu-interp/InterpCore.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace kiln::rocdl::interp::icore;

//===----------------------------------------------------------------------===//
// Types and encodings
//===----------------------------------------------------------------------===//

Type kiln::rocdl::interp::icore::elemType(Type t) {
  if (auto v = dyn_cast<VectorType>(t))
    return v.getElementType();
  return t;
}

unsigned kiln::rocdl::interp::icore::numElems(Type t) {
  if (auto v = dyn_cast<VectorType>(t)) {
    if (v.isScalable())
      fail("scalable vector " + typeString(t));
    return unsigned(v.getNumElements());
  }
  return 1;
}

unsigned kiln::rocdl::interp::icore::intWidth(Type t) {
  t = elemType(t);
  if (auto i = dyn_cast<IntegerType>(t))
    return i.getWidth();
  if (isa<IndexType>(t))
    return 64;
  fail("expected an integer type, got " + typeString(t));
}

unsigned kiln::rocdl::interp::icore::storageBits(Type t) {
  if (isa<IndexType>(t))
    return 64;
  unsigned bits = 0;
  if (auto i = dyn_cast<IntegerType>(t))
    bits = i.getWidth() == 1 ? 8 : i.getWidth();
  else if (auto f = dyn_cast<FloatType>(t))
    bits = f.getWidth();
  else
    fail("unsupported element type in memory: " + typeString(t));
  if (bits != 4 && bits % 8 != 0)
    fail("unsupported element width in memory: " + typeString(t));
  if (bits > 64)
    fail("element wider than 64 bits: " + typeString(t));
  return bits;
}

double kiln::rocdl::interp::icore::e2m1Value(unsigned code) {
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  double v = kMag[code & 7];
  return (code & 8) ? -v : v;
}

unsigned kiln::rocdl::interp::icore::e2m1Round(double v) {
  // Nearest of the eight magnitudes, ties to the even code, saturating at
  // 6; NaN gives a (signed) zero like the GemmEmulator model.
  unsigned sign = std::signbit(v) ? 8 : 0;
  double mag = std::fabs(v);
  static const double kMag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  unsigned best = 7;
  if (!(mag >= 6.0)) {
    best = 0;
    for (unsigned code = 1; code < 8; ++code) {
      double dNew = std::fabs(mag - kMag[code]),
             dOld = std::fabs(mag - kMag[best]);
      if (dNew < dOld || (dNew == dOld && (code & 1) == 0))
        best = code;
    }
  }
  return sign | best;
}

float kiln::rocdl::interp::icore::bf16Round(float f) {
  uint32_t bits = f32Bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return bitsF32((bits | 0x400000u) & 0xffff0000u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return bitsF32(bits & 0xffff0000u);
}

static const llvm::fltSemantics &semantics(Type t) {
  if (auto f = dyn_cast<FloatType>(t))
    return f.getFloatSemantics();
  fail("expected a float type, got " + typeString(t));
}

double kiln::rocdl::interp::icore::decodeFloat(Type t, uint64_t bits) {
  if (t.isF32())
    return bitsF32(uint32_t(bits));
  if (t.isF64()) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  if (t.isBF16())
    return bitsF32(uint32_t(bits) << 16);
  if (isa<Float4E2M1FNType>(t))
    return e2m1Value(unsigned(bits & 0xF));
  if (isa<Float8E8M0FNUType>(t))
    return (bits & 0xFF) == 0xFF ? std::numeric_limits<double>::quiet_NaN()
                                 : std::ldexp(1.0, int(bits & 0xFF) - 127);
  const llvm::fltSemantics &sem = semantics(t);
  llvm::APFloat f(sem, llvm::APInt(llvm::APFloat::getSizeInBits(sem), bits));
  bool lost;
  f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
            &lost);
  return f.convertToDouble();
}

static llvm::APFloat toSem(Type t, double v, llvm::RoundingMode mode) {
  llvm::APFloat f(v);
  bool lost;
  f.convert(semantics(t), mode, &lost);
  return f;
}

uint64_t kiln::rocdl::interp::icore::encodeFloat(Type t, double v) {
  if (t.isF32())
    return f32Bits(float(v));
  if (t.isF64()) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return b;
  }
  if (t.isBF16())
    return f32Bits(bf16Round(float(v))) >> 16;
  if (isa<Float4E2M1FNType>(t))
    return e2m1Round(v);
  return toSem(t, v, llvm::RoundingMode::NearestTiesToEven)
      .bitcastToAPInt()
      .getZExtValue();
}

double kiln::rocdl::interp::icore::roundToFloat(Type t, double v) {
  if (t.isF64())
    return v;
  if (t.isF32())
    return double(float(v));
  if (t.isBF16())
    return bf16Round(float(v));
  if (isa<Float4E2M1FNType>(t))
    return e2m1Value(e2m1Round(v));
  return decodeFloat(t, encodeFloat(t, v));
}

Word kiln::rocdl::interp::icore::bitsToWord(Type t, uint64_t bits) {
  if (isa<FloatType>(t))
    return fromF(decodeFloat(t, bits));
  return bits & lowBits(intWidth(t));
}

uint64_t kiln::rocdl::interp::icore::wordToBits(Type t, Word w) {
  if (isa<FloatType>(t))
    return encodeFloat(t, asF(w));
  return w & lowBits(intWidth(t));
}

ScalarCodec kiln::rocdl::interp::icore::ScalarCodec::of(Type t) {
  ScalarCodec c;
  c.type = t;
  c.bits = storageBits(t);
  if (t.isF32())
    c.kind = F32;
  else if (t.isBF16())
    c.kind = BF16;
  else if (t.isF64()) {
    c.kind = F64;
    c.intBits = 64;
  } else if (!isa<FloatType>(t)) {
    c.kind = Int;
    c.intBits = intWidth(t);
  }
  return c;
}

Word kiln::rocdl::interp::icore::ScalarCodec::decodeOther(uint64_t raw) const {
  return bitsToWord(type, raw);
}

uint64_t kiln::rocdl::interp::icore::ScalarCodec::encodeOther(Word w) const {
  return wordToBits(type, w);
}

//===----------------------------------------------------------------------===//
// Elementwise helpers
//===----------------------------------------------------------------------===//

namespace {

/// result[e] = f(element type, operand words...) for the active lanes.
template <class F>
void mapOp(Interp &in, Operation &op, const Mask &mask, F f) {
  Value r = op.getResult(0);
  Val res = in.make(r.getType());
  unsigned n = op.getNumOperands();
  SmallVector<const Val *, 3> ops;
  for (unsigned i = 0; i < n; ++i)
    ops.push_back(&in.get(op.getOperand(i)));
  Word args[4] = {0, 0, 0, 0};
  for (unsigned l = 0; l < in.lanes; ++l) {
    if (!mask[l])
      continue;
    for (unsigned e = 0; e < res.width; ++e) {
      for (unsigned i = 0; i < n && i < 4; ++i)
        args[i] = ops[i]->width == 1 ? ops[i]->at(l) : ops[i]->at(l, e);
      res.at(l, e) = f(args);
    }
  }
  in.set(r, std::move(res));
}

bool isF64(Type t) { return elemType(t).isF64(); }

/// A binary float op: in double for f64, else in float and rounded.
template <class F>
void floatBinary(Interp &in, Operation &op, const Mask &m, F f) {
  Type t = elemType(op.getResult(0).getType());
  bool wide = t.isF64();
  mapOp(in, op, m, [&](const Word *a) {
    double x = asF(a[0]), y = asF(a[1]);
    double r = wide ? f(x, y) : double(f(float(x), float(y)));
    return fromF(roundToFloat(t, r));
  });
}

template <class F>
void floatUnary(Interp &in, Operation &op, const Mask &m, F f) {
  Type t = elemType(op.getResult(0).getType());
  bool wide = t.isF64();
  mapOp(in, op, m, [&](const Word *a) {
    double x = asF(a[0]);
    double r = wide ? f(x) : double(f(float(x)));
    return fromF(roundToFloat(t, r));
  });
}

/// Transcendental: libm in double, rounded to the result type.
template <class F> void libm(Interp &in, Operation &op, const Mask &m, F f) {
  Type t = elemType(op.getResult(0).getType());
  mapOp(in, op, m,
        [&](const Word *a) { return fromF(roundToFloat(t, f(asF(a[0])))); });
}

template <class F>
void intBinary(Interp &in, Operation &op, const Mask &m, F f) {
  unsigned bits = intWidth(op.getResult(0).getType());
  mapOp(in, op, m, [&](const Word *a) {
    return Word(f(a[0] & lowBits(bits), a[1] & lowBits(bits), bits)) &
           lowBits(bits);
  });
}

double maximum(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
double minimum(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

void divZero(Operation &op) {
  fail("division by zero in '" + op.getName().getStringRef() + "'");
}

//===----------------------------------------------------------------------===//
// arith
//===----------------------------------------------------------------------===//

void constantOp(Interp &in, Operation &op, const Mask &) {
  Value r = op.getResult(0);
  Type t = r.getType();
  Type et = elemType(t);
  Val res = in.make(t);
  SmallVector<Word> elems;
  Attribute attr = op.getAttr("value");
  auto word = [&](Attribute a) -> Word {
    if (auto f = dyn_cast<FloatAttr>(a)) {
      llvm::APFloat v = f.getValue();
      bool lost;
      v.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
                &lost);
      return fromF(v.convertToDouble());
    }
    if (auto i = dyn_cast<IntegerAttr>(a))
      return i.getValue().getZExtValue() & lowBits(intWidth(et));
    fail("unsupported constant " + typeString(t));
  };
  if (auto dense = dyn_cast_or_null<DenseElementsAttr>(attr)) {
    for (Attribute a : dense.getValues<Attribute>())
      elems.push_back(word(a));
  } else if (attr && (isa<FloatAttr, IntegerAttr>(attr))) {
    elems.push_back(word(attr));
  } else {
    fail("unsupported constant of type " + typeString(t));
  }
  if (elems.size() != res.width)
    fail("constant with " + llvm::Twine(elems.size()) + " values for " +
         typeString(t));
  for (unsigned l = 0; l < in.lanes; ++l)
    for (unsigned e = 0; e < res.width; ++e)
      res.at(l, e) = elems[e];
  in.set(r, std::move(res));
}

void poisonOp(Interp &in, Operation &op, const Mask &) {
  Value r = op.getResult(0);
  in.set(r, in.make(r.getType())); // zeros
}

void cmpiOp(Interp &in, Operation &op, const Mask &m) {
  auto pred = cast<arith::CmpIOp>(op).getPredicate();
  unsigned bits = intWidth(op.getOperand(0).getType());
  mapOp(in, op, m, [&](const Word *a) -> Word {
    Word x = a[0] & lowBits(bits), y = a[1] & lowBits(bits);
    int64_t sx = sext(x, bits), sy = sext(y, bits);
    using P = arith::CmpIPredicate;
    switch (pred) {
    case P::eq:
      return x == y;
    case P::ne:
      return x != y;
    case P::slt:
      return sx < sy;
    case P::sle:
      return sx <= sy;
    case P::sgt:
      return sx > sy;
    case P::sge:
      return sx >= sy;
    case P::ult:
      return x < y;
    case P::ule:
      return x <= y;
    case P::ugt:
      return x > y;
    case P::uge:
      return x >= y;
    }
    return 0;
  });
}

void cmpfOp(Interp &in, Operation &op, const Mask &m) {
  auto pred = cast<arith::CmpFOp>(op).getPredicate();
  mapOp(in, op, m, [&](const Word *a) -> Word {
    double x = asF(a[0]), y = asF(a[1]);
    bool uno = std::isnan(x) || std::isnan(y);
    using P = arith::CmpFPredicate;
    switch (pred) {
    case P::AlwaysFalse:
      return 0;
    case P::OEQ:
      return !uno && x == y;
    case P::OGT:
      return !uno && x > y;
    case P::OGE:
      return !uno && x >= y;
    case P::OLT:
      return !uno && x < y;
    case P::OLE:
      return !uno && x <= y;
    case P::ONE:
      return !uno && x != y;
    case P::ORD:
      return !uno;
    case P::UEQ:
      return uno || x == y;
    case P::UGT:
      return uno || x > y;
    case P::UGE:
      return uno || x >= y;
    case P::ULT:
      return uno || x < y;
    case P::ULE:
      return uno || x <= y;
    case P::UNE:
      return uno || x != y;
    case P::UNO:
      return uno;
    case P::AlwaysTrue:
      return 1;
    }
    return 0;
  });
}

void selectOp(Interp &in, Operation &op, const Mask &m) {
  mapOp(in, op, m, [](const Word *a) { return (a[0] & 1) ? a[1] : a[2]; });
}

void extOp(Interp &in, Operation &op, const Mask &m) {
  bool sign = op.getName().getStringRef() == "arith.extsi" ||
              op.getName().getStringRef() == "arith.index_cast";
  unsigned from = intWidth(op.getOperand(0).getType());
  unsigned to = intWidth(op.getResult(0).getType());
  mapOp(in, op, m, [&](const Word *a) {
    Word x = a[0] & lowBits(from);
    return Word(sign ? Word(sext(x, from)) : x) & lowBits(to);
  });
}

void bitcastOp(Interp &in, Operation &op, const Mask &m) {
  Type from = elemType(op.getOperand(0).getType());
  Type to = elemType(op.getResult(0).getType());
  mapOp(in, op, m,
        [&](const Word *a) { return bitsToWord(to, wordToBits(from, a[0])); });
}

void itofpOp(Interp &in, Operation &op, const Mask &m) {
  bool sign = op.getName().getStringRef() == "arith.sitofp";
  unsigned from = intWidth(op.getOperand(0).getType());
  Type to = elemType(op.getResult(0).getType());
  mapOp(in, op, m, [&](const Word *a) {
    Word x = a[0] & lowBits(from);
    double r;
    if (to.isF64())
      r = sign ? double(sext(x, from)) : double(x);
    else if (sign)
      r = roundToFloat(to, double(float(sext(x, from))));
    else
      r = roundToFloat(to, double(float(x)));
    return fromF(r);
  });
}

void fptoiOp(Interp &in, Operation &op, const Mask &m) {
  bool sign = op.getName().getStringRef() == "arith.fptosi";
  unsigned to = intWidth(op.getResult(0).getType());
  mapOp(in, op, m, [&](const Word *a) {
    double x = std::trunc(asF(a[0]));
    // Out of range is poison in LLVM; saturate (NaN -> 0).
    if (std::isnan(x))
      return Word(0);
    if (sign) {
      double lo = -std::ldexp(1.0, int(to) - 1),
             hi = std::ldexp(1.0, int(to) - 1) - 1;
      x = std::clamp(x, lo, hi);
      return Word(int64_t(x)) & lowBits(to);
    }
    x = std::clamp(x, 0.0, std::ldexp(1.0, int(to)) - 1);
    return Word(x >= 0x1p63 ? uint64_t(x - 0x1p63) + (uint64_t(1) << 63)
                            : uint64_t(x)) &
           lowBits(to);
  });
}

void truncfOp(Interp &in, Operation &op, const Mask &m) {
  Type to = elemType(op.getResult(0).getType());
  auto mode = llvm::RoundingMode::NearestTiesToEven;
  if (auto rm = cast<arith::TruncFOp>(op).getRoundingmodeAttr()) {
    switch (rm.getValue()) {
    case arith::RoundingMode::to_nearest_even:
      break;
    case arith::RoundingMode::downward:
      mode = llvm::RoundingMode::TowardNegative;
      break;
    case arith::RoundingMode::upward:
      mode = llvm::RoundingMode::TowardPositive;
      break;
    case arith::RoundingMode::toward_zero:
      mode = llvm::RoundingMode::TowardZero;
      break;
    case arith::RoundingMode::to_nearest_away:
      mode = llvm::RoundingMode::NearestTiesToAway;
      break;
    }
  }
  mapOp(in, op, m, [&](const Word *a) {
    double x = asF(a[0]);
    if (mode == llvm::RoundingMode::NearestTiesToEven)
      return fromF(roundToFloat(to, x));
    llvm::APFloat f = toSem(to, x, mode);
    bool lost;
    f.convert(llvm::APFloat::IEEEdouble(), llvm::APFloat::rmNearestTiesToEven,
              &lost);
    return fromF(f.convertToDouble());
  });
}

void extfOp(Interp &in, Operation &op, const Mask &m) {
  mapOp(in, op, m, [](const Word *a) { return a[0]; }); // exact
}

void truncOp(Interp &in, Operation &op, const Mask &m) {
  unsigned to = intWidth(op.getResult(0).getType());
  mapOp(in, op, m, [&](const Word *a) { return a[0] & lowBits(to); });
}

void fmaOp(Interp &in, Operation &op, const Mask &m) {
  Type t = elemType(op.getResult(0).getType());
  bool wide = t.isF64();
  mapOp(in, op, m, [&](const Word *a) {
    double x = asF(a[0]), y = asF(a[1]), z = asF(a[2]);
    double r = wide ? std::fma(x, y, z)
                    : double(std::fma(float(x), float(y), float(z)));
    return fromF(roundToFloat(t, r));
  });
}

//===----------------------------------------------------------------------===//
// llvm.call_intrinsic
//===----------------------------------------------------------------------===//

/// "llvm.ldexp.f32.i32" -> "llvm.ldexp": drops type-mangling suffixes.
StringRef baseName(StringRef name) {
  while (true) {
    size_t dot = name.rfind('.');
    if (dot == StringRef::npos)
      return name;
    StringRef last = name.substr(dot + 1);
    StringRef t = last;
    if (t.consume_front("v")) {
      while (!t.empty() && isdigit(t.front()))
        t = t.drop_front();
    }
    bool isType = t == "f16" || t == "bf16" || t == "f32" || t == "f64" ||
                  (t.consume_front("i") && !t.empty() &&
                   llvm::all_of(t, [](char c) { return isdigit(c); }));
    if (!isType || dot < 5)
      return name;
    name = name.substr(0, dot);
  }
}

uint32_t scaleExponent(double scale) {
  return (f32Bits(float(scale)) >> 23) & 0xFF;
}

void callIntrinsic(Interp &in, Operation &op, const Mask &m) {
  StringRef full = cast<LLVM::CallIntrinsicOp>(op).getIntrin();
  StringRef name = baseName(full);
  if (op.getNumResults() == 0) {
    if (name == "llvm.amdgcn.s.barrier") {
      for (unsigned l = 0; l < in.lanes; ++l)
        if (!m[l])
          fail("llvm.amdgcn.s.barrier under divergent control flow");
      return;
    }
    if (name == "llvm.amdgcn.sched.barrier" ||
        name == "llvm.amdgcn.s.waitcnt" || name == "llvm.amdgcn.s.setprio" ||
        name == "llvm.amdgcn.sched.group.barrier")
      return;
    fail("unsupported intrinsic '" + full + "' (llvm.call_intrinsic)");
  }
  if (op.getNumResults() != 1)
    fail("unsupported intrinsic '" + full + "' with several results");
  Type rt = op.getResult(0).getType();
  Type et = elemType(rt);
  if (name == "llvm.amdgcn.cvt.scalef32.pk.fp4.f32") {
    // (old i32, src0 f32, src1 f32, scale f32, dst byte) -> i32
    if (op.getNumOperands() != 5)
      fail("'" + full + "' expects 5 operands");
    Val res = in.make(rt);
    const Val &old = in.get(op.getOperand(0)), &s0 = in.get(op.getOperand(1)),
              &s1 = in.get(op.getOperand(2)), &sc = in.get(op.getOperand(3)),
              &sel = in.get(op.getOperand(4));
    for (unsigned l = 0; l < in.lanes; ++l) {
      if (!m[l])
        continue;
      int e = int(scaleExponent(asF(sc.at(l))));
      unsigned lo = e2m1Round(std::ldexp(asF(s0.at(l)), 127 - e));
      unsigned hi = e2m1Round(std::ldexp(asF(s1.at(l)), 127 - e));
      unsigned byte = unsigned(sel.at(l) & 3);
      uint32_t w = uint32_t(old.at(l));
      w = (w & ~(0xFFu << (8 * byte))) | ((lo | (hi << 4)) << (8 * byte));
      res.at(l) = w;
    }
    in.set(op.getResult(0), std::move(res));
    return;
  }
  if (name == "llvm.amdgcn.cvt.scalef32.pk.f32.fp4") {
    // (src i32, scale f32, src byte) -> <2 x float>
    Val res = in.make(rt);
    const Val &src = in.get(op.getOperand(0)), &sc = in.get(op.getOperand(1)),
              &sel = in.get(op.getOperand(2));
    for (unsigned l = 0; l < in.lanes; ++l) {
      if (!m[l])
        continue;
      int e = int(scaleExponent(asF(sc.at(l))));
      unsigned byte = (uint32_t(src.at(l)) >> (8 * (sel.at(l) & 3))) & 0xFF;
      for (unsigned i = 0; i < 2 && i < res.width; ++i)
        res.at(l, i) = fromF(roundToFloat(
            elemType(rt),
            std::ldexp(e2m1Value((byte >> (4 * i)) & 0xF), e - 127)));
    }
    in.set(op.getResult(0), std::move(res));
    return;
  }
  if (isa<FloatType>(et)) {
    using U = double (*)(double);
    U unary =
        llvm::StringSwitch<U>(name)
            .Case("llvm.amdgcn.exp2", [](double x) { return std::exp2(x); })
            .Case("llvm.amdgcn.log", [](double x) { return std::log2(x); })
            .Case("llvm.amdgcn.rcp", [](double x) { return 1.0 / x; })
            .Case("llvm.amdgcn.rsq",
                  [](double x) { return 1.0 / std::sqrt(x); })
            .Case("llvm.amdgcn.sqrt", [](double x) { return std::sqrt(x); })
            // v_sin/v_cos take revolutions.
            .Case("llvm.amdgcn.sin",
                  [](double x) { return std::sin(2 * M_PI * x); })
            .Case("llvm.amdgcn.cos",
                  [](double x) { return std::cos(2 * M_PI * x); })
            .Case("llvm.amdgcn.fract",
                  [](double x) {
                    return std::isinf(x) ? std::nan("") : x - std::floor(x);
                  })
            .Case("llvm.floor", [](double x) { return std::floor(x); })
            .Case("llvm.ceil", [](double x) { return std::ceil(x); })
            .Case("llvm.trunc", [](double x) { return std::trunc(x); })
            .Case("llvm.round", [](double x) { return std::round(x); })
            .Case("llvm.roundeven", [](double x) { return std::nearbyint(x); })
            .Case("llvm.rint", [](double x) { return std::nearbyint(x); })
            .Case("llvm.nearbyint", [](double x) { return std::nearbyint(x); })
            .Case("llvm.fabs", [](double x) { return std::fabs(x); })
            .Case("llvm.canonicalize", [](double x) { return x; })
            .Case("llvm.sqrt", [](double x) { return std::sqrt(x); })
            .Case("llvm.exp", [](double x) { return std::exp(x); })
            .Case("llvm.exp2", [](double x) { return std::exp2(x); })
            .Case("llvm.log", [](double x) { return std::log(x); })
            .Case("llvm.log2", [](double x) { return std::log2(x); })
            .Case("llvm.log10", [](double x) { return std::log10(x); })
            .Case("llvm.sin", [](double x) { return std::sin(x); })
            .Case("llvm.cos", [](double x) { return std::cos(x); })
            .Case("llvm.tanh", [](double x) { return std::tanh(x); })
            .Default(nullptr);
    if (unary && op.getNumOperands() == 1) {
      // Rounding-free ops are exact in double, the others are libm.
      libm(in, op, m, unary);
      return;
    }
    if (name == "llvm.ldexp" || name == "llvm.amdgcn.ldexp") {
      unsigned bits = intWidth(op.getOperand(1).getType());
      mapOp(in, op, m, [&](const Word *a) {
        double x = asF(a[0]);
        int e = int(std::clamp<int64_t>(sext(a[1], bits), -100000, 100000));
        double r =
            et.isF64() ? std::ldexp(x, e) : double(std::ldexp(float(x), e));
        return fromF(roundToFloat(et, r));
      });
      return;
    }
    if (name == "llvm.fma" || name == "llvm.fmuladd") {
      fmaOp(in, op, m);
      return;
    }
    using B = double (*)(double, double);
    B binary =
        llvm::StringSwitch<B>(name)
            .Case("llvm.minnum",
                  [](double a, double b) { return std::fmin(a, b); })
            .Case("llvm.maxnum",
                  [](double a, double b) { return std::fmax(a, b); })
            .Case("llvm.minimum", minimum)
            .Case("llvm.maximum", maximum)
            .Case("llvm.copysign",
                  [](double a, double b) { return std::copysign(a, b); })
            .Case("llvm.pow", [](double a, double b) { return std::pow(a, b); })
            .Default(nullptr);
    if (binary && op.getNumOperands() == 2) {
      mapOp(in, op, m, [&](const Word *a) {
        return fromF(roundToFloat(et, binary(asF(a[0]), asF(a[1]))));
      });
      return;
    }
    if (name == "llvm.amdgcn.fmed3" && op.getNumOperands() == 3) {
      mapOp(in, op, m, [&](const Word *a) {
        double x = asF(a[0]), y = asF(a[1]), z = asF(a[2]);
        double r = std::fmax(std::fmin(x, y), std::fmin(std::fmax(x, y), z));
        return fromF(r);
      });
      return;
    }
  } else if (isa<IntegerType>(et)) {
    unsigned bits = intWidth(et);
    using B = Word (*)(Word, Word, unsigned);
    B binary =
        llvm::StringSwitch<B>(name)
            .Case("llvm.smin",
                  [](Word a, Word b, unsigned n) {
                    return sext(a, n) < sext(b, n) ? a : b;
                  })
            .Case("llvm.smax",
                  [](Word a, Word b, unsigned n) {
                    return sext(a, n) > sext(b, n) ? a : b;
                  })
            .Case("llvm.umin",
                  [](Word a, Word b, unsigned) { return std::min(a, b); })
            .Case("llvm.umax",
                  [](Word a, Word b, unsigned) { return std::max(a, b); })
            .Default(nullptr);
    if (binary && op.getNumOperands() == 2) {
      intBinary(in, op, m, binary);
      return;
    }
    if (name == "llvm.ctpop" && op.getNumOperands() == 1) {
      mapOp(in, op, m, [&](const Word *a) {
        return Word(__builtin_popcountll(a[0] & lowBits(bits)));
      });
      return;
    }
    if (name == "llvm.abs" && op.getNumOperands() == 2) {
      mapOp(in, op, m, [&](const Word *a) {
        int64_t v = sext(a[0], bits);
        return Word(v < 0 ? -v : v) & lowBits(bits);
      });
      return;
    }
  }
  fail("unsupported intrinsic '" + full + "' (llvm.call_intrinsic)");
}

} // namespace

void kiln::rocdl::interp::icore::registerScalarOps(HandlerMap &map) {
  map["arith.constant"] = constantOp;
  map["ub.poison"] = poisonOp;
  map["arith.cmpi"] = cmpiOp;
  map["arith.cmpf"] = cmpfOp;
  map["arith.select"] = selectOp;
  map["arith.extsi"] = extOp;
  map["arith.extui"] = extOp;
  map["arith.index_cast"] = extOp;
  map["arith.index_castui"] = extOp;
  map["arith.trunci"] = truncOp;
  map["arith.bitcast"] = bitcastOp;
  map["arith.sitofp"] = itofpOp;
  map["arith.uitofp"] = itofpOp;
  map["arith.fptosi"] = fptoiOp;
  map["arith.fptoui"] = fptoiOp;
  map["arith.truncf"] = truncfOp;
  map["arith.extf"] = extfOp;
  map["math.fma"] = fmaOp;
  map["llvm.call_intrinsic"] = callIntrinsic;

#define INT_BIN(NAME, ...)                                                     \
  map[NAME] = [](Interp &in, Operation &op, const Mask &m) {                   \
    intBinary(in, op, m, [&](Word a, Word b, unsigned n) -> Word {             \
      (void)n;                                                                 \
      return __VA_ARGS__;                                                      \
    });                                                                        \
  };
  INT_BIN("arith.addi", a + b)
  INT_BIN("arith.subi", a - b)
  INT_BIN("arith.muli", a * b)
  INT_BIN("arith.andi", a & b)
  INT_BIN("arith.ori", a | b)
  INT_BIN("arith.xori", a ^ b)
  INT_BIN("arith.shli", b >= n ? 0 : a << b)
  INT_BIN("arith.shrui", b >= n ? 0 : a >> b)
  INT_BIN("arith.shrsi", Word(sext(a, n) >> (b >= n ? n - 1 : b)))
  INT_BIN("arith.maxsi", sext(a, n) > sext(b, n) ? a : b)
  INT_BIN("arith.minsi", sext(a, n) < sext(b, n) ? a : b)
  INT_BIN("arith.maxui", std::max(a, b))
  INT_BIN("arith.minui", std::min(a, b))
  INT_BIN("arith.divui", b == 0 ? (divZero(op), 0) : a / b)
  INT_BIN("arith.remui", b == 0 ? (divZero(op), 0) : a % b)
  INT_BIN("arith.ceildivui", b == 0 ? (divZero(op), 0) : (a + b - 1) / b)
  INT_BIN(
      "arith.divsi",
      b == 0 ? (divZero(op), 0)
             : (sext(b, n) == -1 ? Word(0) - a : Word(sext(a, n) / sext(b, n))))
  INT_BIN("arith.remsi",
          b == 0 ? (divZero(op), 0)
                 : (sext(b, n) == -1 ? Word(0) : Word(sext(a, n) % sext(b, n))))
  INT_BIN(
      "arith.floordivsi", b == 0 ? (divZero(op), 0) : [&] {
        int64_t x = sext(a, n), y = sext(b, n);
        if (y == -1)
          return Word(0) - a;
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0)))
          --q;
        return Word(q);
      }())
  INT_BIN(
      "arith.ceildivsi", b == 0 ? (divZero(op), 0) : [&] {
        int64_t x = sext(a, n), y = sext(b, n);
        if (y == -1)
          return Word(0) - a;
        int64_t q = x / y;
        if ((x % y != 0) && ((x < 0) == (y < 0)))
          ++q;
        return Word(q);
      }())
#undef INT_BIN

#define FLOAT_BIN(NAME, EXPR)                                                  \
  map[NAME] = [](Interp &in, Operation &op, const Mask &m) {                   \
    floatBinary(in, op, m, [](auto a, auto b) { return EXPR; });               \
  };
  FLOAT_BIN("arith.addf", a + b)
  FLOAT_BIN("arith.subf", a - b)
  FLOAT_BIN("arith.mulf", a * b)
  FLOAT_BIN("arith.divf", a / b)
  FLOAT_BIN("arith.remf", std::fmod(a, b))
  FLOAT_BIN("arith.maxnumf", std::fmax(a, b))
  FLOAT_BIN("arith.minnumf", std::fmin(a, b))
  FLOAT_BIN("arith.maximumf", decltype(a)(maximum(a, b)))
  FLOAT_BIN("arith.minimumf", decltype(a)(minimum(a, b)))
  FLOAT_BIN("math.copysign", std::copysign(a, b))
  FLOAT_BIN("math.powf", decltype(a)(std::pow(double(a), double(b))))
  FLOAT_BIN("math.atan2", decltype(a)(std::atan2(double(a), double(b))))
#undef FLOAT_BIN

#define FLOAT_UN(NAME, EXPR)                                                   \
  map[NAME] = [](Interp &in, Operation &op, const Mask &m) {                   \
    floatUnary(in, op, m, [](auto a) { return EXPR; });                        \
  };
  FLOAT_UN("arith.negf", -a)
  FLOAT_UN("math.absf", std::fabs(a))
  FLOAT_UN("math.floor", std::floor(a))
  FLOAT_UN("math.ceil", std::ceil(a))
  FLOAT_UN("math.trunc", std::trunc(a))
  FLOAT_UN("math.round", std::round(a))
  FLOAT_UN("math.roundeven", std::nearbyint(a))
  FLOAT_UN("math.sqrt", std::sqrt(a))
#undef FLOAT_UN

#define LIBM(NAME, EXPR)                                                       \
  map[NAME] = [](Interp &in, Operation &op, const Mask &m) {                   \
    libm(in, op, m, [](double a) { return EXPR; });                            \
  };
  LIBM("math.rsqrt", 1.0 / std::sqrt(a))
  LIBM("math.exp", std::exp(a))
  LIBM("math.exp2", std::exp2(a))
  LIBM("math.expm1", std::expm1(a))
  LIBM("math.log", std::log(a))
  LIBM("math.log2", std::log2(a))
  LIBM("math.log10", std::log10(a))
  LIBM("math.log1p", std::log1p(a))
  LIBM("math.sin", std::sin(a))
  LIBM("math.cos", std::cos(a))
  LIBM("math.tan", std::tan(a))
  LIBM("math.tanh", std::tanh(a))
  LIBM("math.sinh", std::sinh(a))
  LIBM("math.cosh", std::cosh(a))
  LIBM("math.asin", std::asin(a))
  LIBM("math.acos", std::acos(a))
  LIBM("math.atan", std::atan(a))
  LIBM("math.erf", std::erf(a))
  LIBM("math.cbrt", std::cbrt(a))
#undef LIBM

  map["math.absi"] = [](Interp &in, Operation &op, const Mask &m) {
    unsigned bits = intWidth(op.getResult(0).getType());
    mapOp(in, op, m, [&](const Word *a) {
      int64_t v = sext(a[0], bits);
      return Word(v < 0 ? -v : v) & lowBits(bits);
    });
  };
  map["math.ctpop"] = [](Interp &in, Operation &op, const Mask &m) {
    unsigned bits = intWidth(op.getResult(0).getType());
    mapOp(in, op, m, [&](const Word *a) {
      return Word(__builtin_popcountll(a[0] & lowBits(bits)));
    });
  };
  map["math.ctlz"] = [](Interp &in, Operation &op, const Mask &m) {
    unsigned bits = intWidth(op.getResult(0).getType());
    mapOp(in, op, m, [&](const Word *a) {
      Word x = a[0] & lowBits(bits);
      return x == 0 ? Word(bits) : Word(__builtin_clzll(x) - (64 - bits));
    });
  };
  map["math.cttz"] = [](Interp &in, Operation &op, const Mask &m) {
    unsigned bits = intWidth(op.getResult(0).getType());
    mapOp(in, op, m, [&](const Word *a) {
      Word x = a[0] & lowBits(bits);
      return x == 0 ? Word(bits) : Word(__builtin_ctzll(x));
    });
  };
}
