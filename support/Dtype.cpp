//===- Dtype.cpp - Safetensors element types ------------------------------===//

#include "support/Dtype.h"

namespace kiln {

namespace {
struct DtypeEntry {
  Dtype dtype;
  const char *name;
  uint64_t size;
};

constexpr DtypeEntry kDtypes[] = {
    {Dtype::BOOL, "BOOL", 1},       {Dtype::U8, "U8", 1},
    {Dtype::I8, "I8", 1},           {Dtype::I16, "I16", 2},
    {Dtype::U16, "U16", 2},         {Dtype::I32, "I32", 4},
    {Dtype::U32, "U32", 4},         {Dtype::I64, "I64", 8},
    {Dtype::U64, "U64", 8},         {Dtype::F16, "F16", 2},
    {Dtype::BF16, "BF16", 2},       {Dtype::F32, "F32", 4},
    {Dtype::F64, "F64", 8},         {Dtype::F8_E4M3, "F8_E4M3", 1},
    {Dtype::F8_E5M2, "F8_E5M2", 1},
};

const DtypeEntry &entryFor(Dtype dtype) {
  for (const DtypeEntry &entry : kDtypes)
    if (entry.dtype == dtype)
      return entry;
  return kDtypes[0]; // unreachable for valid enumerators
}
} // namespace

const char *dtypeName(Dtype dtype) { return entryFor(dtype).name; }

uint64_t dtypeSize(Dtype dtype) { return entryFor(dtype).size; }

bool isFloatingPoint(Dtype dtype) {
  return dtype == Dtype::BF16 || dtype == Dtype::F16 || dtype == Dtype::F32 ||
         dtype == Dtype::F64;
}

Result<Dtype> parseDtype(std::string_view name) {
  for (const DtypeEntry &entry : kDtypes)
    if (name == entry.name)
      return entry.dtype;
  std::string known;
  for (const DtypeEntry &entry : kDtypes) {
    if (!known.empty())
      known += ", ";
    known += entry.name;
  }
  return makeError(StatusCode::InvalidArgument, "unknown dtype '", name,
                   "' (expected one of ", known, ")");
}

} // namespace kiln
