//===- PlanParams.cpp - Kernel parameters as dispatch attributes ----------===//

#include "dialects/plan/IR/PlanOps.h"

#include <type_traits>

using namespace mlir;
using namespace kiln;

std::optional<abi::Kernel> kiln::plan::kernelNamed(llvm::StringRef name) {
  for (size_t k = 0; k < size_t(abi::Kernel::Count); ++k)
    if (abi::kKernelNames[k] == std::string_view(name.data(), name.size()))
      return abi::Kernel(k);
  return std::nullopt;
}

DictionaryAttr kiln::plan::paramsToAttr(MLIRContext *context,
                                        const abi::Params &params) {
  Builder b(context);
  SmallVector<NamedAttribute> attrs;
  abi::forEachParam(params, [&](const char *name, const auto &field) {
    using T = std::decay_t<decltype(field)>;
    Attribute value;
    if constexpr (std::is_same_v<T, bool>)
      value = b.getBoolAttr(field);
    else if constexpr (std::is_integral_v<T>)
      value = b.getI64IntegerAttr(int64_t(field));
    else
      value = b.getF32FloatAttr(float(field));
    attrs.push_back(b.getNamedAttr(name, value));
  });
  return b.getDictionaryAttr(attrs);
}

std::string kiln::plan::paramsFromAttr(abi::Kernel kernel, DictionaryAttr dict,
                                       abi::Params &params) {
  params = abi::defaultParams(kernel);
  std::string error;
  size_t known = 0;
  std::visit(
      [&](auto &fields) {
        abi::visitFields(fields, [&](const char *name, auto &field) {
          using T = std::decay_t<decltype(field)>;
          Attribute attr = dict ? dict.get(name) : Attribute();
          if (!error.empty())
            return;
          if (!attr) {
            error = std::string("parameter '") + name + "' is missing";
            return;
          }
          ++known;
          if constexpr (std::is_same_v<T, bool>) {
            if (auto v = dyn_cast<BoolAttr>(attr))
              field = v.getValue();
            else
              error = std::string("parameter '") + name + "' must be a bool";
          } else if constexpr (std::is_integral_v<T>) {
            auto v = dyn_cast<IntegerAttr>(attr);
            if (v && v.getType().isInteger(64))
              field = T(v.getInt());
            else
              error = std::string("parameter '") + name + "' must be an i64";
          } else {
            auto v = dyn_cast<FloatAttr>(attr);
            if (v && v.getType().isF32())
              field = T(v.getValueAsDouble());
            else
              error = std::string("parameter '") + name + "' must be an f32";
          }
        });
      },
      params);
  if (error.empty() && dict && dict.size() != known)
    for (NamedAttribute a : dict) {
      bool declared = false;
      abi::forEachParam(params, [&](const char *name, const auto &) {
        declared |= a.getName() == name;
      });
      if (!declared)
        return "'" + a.getName().str() + "' is not a parameter of " +
               std::string(abi::kKernelNames[size_t(kernel)]);
    }
  return error;
}
