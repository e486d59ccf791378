//===- InterpCore.h - State and helpers of the kernel interpreter -------===//
//
// Internal to KernelInterpreter*.cpp. Representation:
//  * Val: one SSA value of a workgroup, `width` 64-bit words per lane (width
//    = number of vector elements, 1 for scalars). Integers (and index, 64
//    bits here) are stored zero-extended to their width; floats of every
//    type as the bits of a double holding their exact value; memrefs as an
//    index into Interp::views; i1 as 0/1.
//  * Mask: one byte per work-item, nonzero when it executes.
//  * Buffer/View: memory the kernel can reach (arguments, workgroup and
//    private buffers, globals) and the strided views memref values name.
// Errors are thrown as InterpError and turned into runKernel's message.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_ROCDL_INTERPCORE_H
#define KILN_TEST_UNIT_ROCDL_INTERPCORE_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln::rocdl::interp::icore {

struct InterpError {
  std::string message;
};
[[noreturn]] void fail(const llvm::Twine &message);
/// `op` printed generically (first line), for messages.
std::string describe(mlir::Operation &op);
std::string typeString(mlir::Type type);

using Word = uint64_t;
using Mask = std::vector<uint8_t>;

struct Val {
  unsigned width = 1;
  std::vector<Word> w; // lane-major: w[lane * width + element]
  Val() = default;
  Val(unsigned lanes, unsigned width)
      : width(width), w(size_t(lanes) * width) {}
  Word &at(unsigned lane, unsigned e = 0) {
    return w[size_t(lane) * width + e];
  }
  Word at(unsigned lane, unsigned e = 0) const {
    return w[size_t(lane) * width + e];
  }
  const Word *lanePtr(unsigned lane) const { return &w[size_t(lane) * width]; }
};

inline double asF(Word w) {
  double d;
  std::memcpy(&d, &w, 8);
  return d;
}
inline Word fromF(double d) {
  Word w;
  std::memcpy(&w, &d, 8);
  return w;
}
inline float bitsF32(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t f32Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
inline Word lowBits(unsigned bits) {
  return bits >= 64 ? ~Word(0) : (Word(1) << bits) - 1;
}
inline int64_t sext(Word w, unsigned bits) {
  if (bits >= 64)
    return int64_t(w);
  unsigned s = 64 - bits;
  return int64_t(w << s) >> s;
}

// Types.
mlir::Type elemType(mlir::Type t); // element of a vector, else t
unsigned numElems(mlir::Type t);   // vector elements, else 1
unsigned intWidth(mlir::Type t);   // integer/index bit width (index: 64)
/// Bits of one value of scalar type `t` in memory (f4: 4).
unsigned storageBits(mlir::Type t);

// Floats: exact value of a `t` value <-> its bits; rounding to `t`.
double decodeFloat(mlir::Type t, uint64_t bits);
uint64_t encodeFloat(mlir::Type t, double v);
double roundToFloat(mlir::Type t, double v);
/// Scalar bits <-> word (ints: masked bits, floats: decoded value).
Word bitsToWord(mlir::Type t, uint64_t bits);
uint64_t wordToBits(mlir::Type t, Word w);
/// E2M1 code <-> value; round to nearest even with saturation at 6.
double e2m1Value(unsigned code);
unsigned e2m1Round(double v);
float bf16Round(float f);

struct Buffer {
  uint8_t *data = nullptr;
  size_t bytes = 0;
  int argNo = -1;   // kernel argument, or -1
  std::string what; // "argument 2", "workgroup buffer 0", ...
  bool readOnly = false;
  std::vector<uint8_t> owned; // storage when the interpreter owns it
};

/// How a scalar type sits in memory, worked out once per type: MLIR's type
/// queries (FloatType is an interface) are too slow for a per-element loop.
struct ScalarCodec {
  mlir::Type type;
  unsigned bits = 0; // storageBits(type)
  enum Kind : uint8_t { F32, BF16, F64, Int, Other } kind = Other;
  unsigned intBits = 0; // Int: intWidth(type)
  static ScalarCodec of(mlir::Type t);
  /// bitsToWord(type, raw).
  Word decode(uint64_t raw) const {
    switch (kind) {
    case F32:
      return fromF(double(bitsF32(uint32_t(raw))));
    case BF16:
      return fromF(double(bitsF32(uint32_t(raw) << 16)));
    case F64:
    case Int:
      return raw & lowBits(intBits);
    case Other:
      break;
    }
    return decodeOther(raw);
  }
  /// wordToBits(type, w).
  uint64_t encode(Word w) const {
    switch (kind) {
    case F32:
      return f32Bits(float(asF(w)));
    case BF16:
      return f32Bits(bf16Round(float(asF(w)))) >> 16;
    case F64:
    case Int:
      return w & lowBits(intBits);
    case Other:
      break;
    }
    return encodeOther(w);
  }

private:
  Word decodeOther(uint64_t raw) const;
  uint64_t encodeOther(Word w) const;
};

/// The `bits` (4 or a multiple of 8, at most 64) at bit `bitPos` of `data`
/// (little-endian).
inline uint64_t readBits(const uint8_t *data, uint64_t bitPos, unsigned bits) {
  const uint8_t *p = data + bitPos / 8;
  switch (bits) {
  case 8:
    return *p;
  case 16: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case 32: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  case 64: {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  default:
    break;
  }
  if (bits % 8 == 0) {
    uint64_t v = 0;
    std::memcpy(&v, p, bits / 8);
    return v;
  }
  return (*p >> (bitPos % 8)) & lowBits(bits);
}
inline void writeBits(uint8_t *data, uint64_t bitPos, unsigned bits,
                      uint64_t v) {
  uint8_t *p = data + bitPos / 8;
  switch (bits) {
  case 8:
    *p = uint8_t(v);
    return;
  case 16:
    std::memcpy(p, &v, 2);
    return;
  case 32:
    std::memcpy(p, &v, 4);
    return;
  case 64:
    std::memcpy(p, &v, 8);
    return;
  default:
    break;
  }
  if (bits % 8 == 0) {
    std::memcpy(p, &v, bits / 8);
    return;
  }
  uint8_t m = uint8_t(lowBits(bits) << (bitPos % 8));
  *p = uint8_t((*p & ~m) | ((v << (bitPos % 8)) & m));
}

struct View {
  unsigned buffer = 0;
  mlir::MemRefType type;
  int64_t offset = 0; // in elements of type's element type
  llvm::SmallVector<int64_t, 4> sizes, strides;
  // Filled by Interp::addView: the scalar of the element type (a vector
  // element's scalar) and the bits of one element.
  ScalarCodec scalar;
  uint64_t elemBits = 0;
};

class Interp;
using Handler = void (*)(Interp &, mlir::Operation &, const Mask &);
using HandlerMap = llvm::StringMap<Handler>;
void registerScalarOps(HandlerMap &map);  // InterpScalar.cpp
void registerVectorOps(HandlerMap &map);  // InterpVector.cpp
void registerControlOps(HandlerMap &map); // KernelInterpreter.cpp
void registerMemoryOps(HandlerMap &map);  // InterpMemory.cpp

class Interp {
public:
  unsigned lanes = 0;
  std::array<int64_t, 3> block{1, 1, 1}, grid{1, 1, 1}, blockId{0, 0, 0};
  llvm::DenseMap<mlir::Value, Val> env;
  std::vector<Buffer> buffers;
  std::vector<View> views;
  llvm::StringMap<unsigned> globals;   // memref.global -> buffer (global space)
  llvm::StringMap<unsigned> wgGlobals; // workgroup-space globals, per group
  mlir::Operation *kernelModule = nullptr;
  const HandlerMap *handlers = nullptr;
  uint64_t steps = 0, maxSteps = 0;

private:
  struct IndexOperands {
    mlir::Operation *op = nullptr;
    unsigned first = 0, n = 0;
    uint64_t version = ~uint64_t(0);
    llvm::SmallVector<const Val *, 4> vals;
    llvm::SmallVector<unsigned, 4> widths;
  } indexOperands_;

public:
  Val &get(mlir::Value v);
  void set(mlir::Value v, Val &&val) {
    ++envVersion; // may move the map's values (indices() caches pointers)
    env[v] = std::move(val);
  }
  Val make(mlir::Type t) const { return Val(lanes, numElems(t)); }

  /// Runs the ops of `block` under `mask` up to its terminator, which it
  /// returns without running it.
  mlir::Operation *execBlock(mlir::Block &block, const Mask &mask);
  void execOp(mlir::Operation &op, const Mask &mask);

  // Memory.
  unsigned addView(View v);
  /// The view lane `lane` reaches through memref value `m`.
  View &viewOf(const Val &m, unsigned lane) {
    return views[size_t(m.at(lane))];
  }
  /// Linear element offset of `indices` in `view`; checks it and the
  /// `count` following elements (along the last dimension) against the
  /// view's static shape and the buffer's real size.
  int64_t address(mlir::Operation &op, View &view,
                  llvm::ArrayRef<int64_t> indices, int64_t count, unsigned lane,
                  bool write);
  /// Reads/writes `count` scalars of type `scalar` at element `linear` of
  /// the view (whose element type may be a vector of `scalar`).
  void readElems(View &view, int64_t linear, mlir::Type scalar, unsigned count,
                 Word *out);
  void writeElems(View &view, int64_t linear, mlir::Type scalar, unsigned count,
                  const Word *in);
  /// Indices of operands [first, first + n) for `lane`, as int64. The
  /// operands' values are looked up once for the lanes of one op.
  llvm::SmallVector<int64_t, 4> indices(mlir::Operation &op, unsigned first,
                                        unsigned n, unsigned lane);
  uint64_t envVersion = 0; // bumped by set() and by clearing env
  unsigned newBuffer(size_t bytes, std::string what, uint8_t fill);
  std::string where(unsigned lane) const;
  /// Fails unless all lanes of each wave with an active lane are active.
  void requireWholeWaves(mlir::Operation &op, const Mask &mask);
};

bool anyActive(const Mask &m);
/// The whole of a static, strided memref over `buffer`.
View identityView(unsigned buffer, mlir::MemRefType type);
/// Bytes of a static memref.
size_t memrefBytes(mlir::MemRefType type);

} // namespace kiln::rocdl::interp::icore

#endif // KILN_TEST_UNIT_ROCDL_INTERPCORE_H
