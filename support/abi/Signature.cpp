//===- Signature.cpp - A dispatch checked against its declaration --------===//

#include "support/abi/Signature.h"

#include <sstream>

namespace kiln::abi {

namespace {

/// Index of the variadic declaration entry, or -1.
int variadicIndex(const KernelDecl &d) {
  for (int i = 0; i < d.numArgs; ++i)
    if (d.args[i].variadic)
      return i;
  return -1;
}

std::string argList(const KernelDecl &d) {
  std::string list;
  for (int i = 0; i < d.numArgs; ++i) {
    list += (i ? ", " : "") + std::string(d.args[i].name);
    if (d.args[i].variadic)
      list += "...";
  }
  return list;
}

std::string paramsList(const KernelDecl &d) {
  std::string list;
  for (int i = 0; i < d.numParams; ++i)
    list += (i ? ", " : "") + std::string(d.params[i].name);
  return list;
}

/// "none" or "rms_norm's parameters" for what `params` holds.
std::string heldParams(const Params &params) {
  if (params.index() == 0)
    return "none";
  for (size_t k = 0; k < size_t(Kernel::Count); ++k)
    if (kParamsIndex[k] == params.index())
      return std::string(kKernelNames[k]) + "'s parameters";
  return "unknown parameters";
}

std::string kindsText(uint8_t kinds) {
  std::string text;
  auto add = [&](uint8_t bit, const char *name) {
    if (!(kinds & bit))
      return;
    text += text.empty() ? "a " : " or ";
    text += name;
  };
  add(kArgBuffer, "Buffer");
  add(kArgWeight, "Weight");
  add(kArgCache, "Cache");
  return text;
}

uint8_t bitOf(RefKind kind) {
  switch (kind) {
  case RefKind::Buffer:
    return kArgBuffer;
  case RefKind::Weight:
    return kArgWeight;
  case RefKind::Cache:
    return kArgCache;
  case RefKind::None:
    break;
  }
  return 0;
}

} // namespace

const char *elemTypeName(ElemType type) {
  switch (type) {
  case ElemType::F32:
    return "F32";
  case ElemType::I32:
    return "I32";
  case ElemType::Other:
    break;
  }
  return "another type";
}

const char *rowsKindName(RowsKind rows) {
  switch (rows) {
  case RowsKind::Tokens:
    return "Tokens";
  case RowsKind::Selected:
    return "Selected";
  case RowsKind::Gathered:
    return "Gathered";
  case RowsKind::Routed:
    return "Routed";
  case RowsKind::One:
    break;
  }
  return "One";
}

const char *refKindName(RefKind kind) {
  switch (kind) {
  case RefKind::Buffer:
    return "Buffer";
  case RefKind::Weight:
    return "Weight";
  case RefKind::Cache:
    return "Cache";
  case RefKind::None:
    break;
  }
  return "None";
}

const ArgDecl *argDeclAt(Kernel kernel, size_t i, size_t n) {
  const KernelDecl &d = declOf(kernel);
  int v = variadicIndex(d);
  if (v < 0)
    return n == d.numArgs && i < n ? &d.args[i] : nullptr;
  size_t fixed = d.numArgs - 1;
  if (n < fixed + 1 || i >= n)
    return nullptr;
  size_t extra = n - fixed; // entries the variadic one covers
  if (i < size_t(v))
    return &d.args[i];
  if (i < size_t(v) + extra)
    return &d.args[v];
  return &d.args[i - extra + 1];
}

std::string argLabel(Kernel kernel, size_t i, size_t n) {
  const ArgDecl *a = argDeclAt(kernel, i, n);
  return "args[" + std::to_string(i) + "] '" + (a ? a->name : "?") + "'";
}

std::string signatureError(Kernel kernel, const std::vector<ArgRef> &args,
                           const Params &params,
                           const std::function<BufferFacts(uint32_t)> &buffer) {
  const KernelDecl &d = declOf(kernel);
  const size_t n = args.size();
  std::ostringstream os;
  if (!argDeclAt(kernel, 0, n)) {
    bool variadic = variadicIndex(d) >= 0;
    os << "has " << n << " args, expected " << (variadic ? "at least " : "")
       << int(d.numArgs) << " (" << argList(d) << ")";
    return os.str();
  }
  if (!paramsMatch(kernel, params)) {
    os << "params: holds " << heldParams(params) << ", expected "
       << (d.numParams
               ? d.name.data() + std::string("'s (") + paramsList(d) + ")"
               : std::string("none"));
    return os.str();
  }
  auto typeOf = [&](size_t i) { return buffer(args[i].index).type; };
  for (size_t i = 0; i < n; ++i) {
    const ArgDecl &a = *argDeclAt(kernel, i, n);
    const ArgRef &r = args[i];
    if (r.kind == RefKind::None) {
      if (a.optional)
        continue;
      return argLabel(kernel, i, n) + ": is None, but the argument is required";
    }
    if (!(bitOf(r.kind) & a.kinds))
      return argLabel(kernel, i, n) + ": is a " + refKindName(r.kind) +
             ", expected " + kindsText(a.kinds);
    if (r.kind != RefKind::Buffer)
      continue;
    BufferFacts b = buffer(r.index);
    ElemType want = b.type;
    std::string why;
    if (a.type == ArgType::F32)
      want = ElemType::F32;
    else if (a.type == ArgType::I32)
      want = ElemType::I32;
    else if (a.type == ArgType::Like) {
      // The first argument the `like` entry expands to.
      size_t j = 0;
      while (j < n && argDeclAt(kernel, j, n) != &d.args[a.like])
        ++j;
      if (j < n && args[j].kind == RefKind::Buffer) {
        want = typeOf(j);
        why = " (the type of " + argLabel(kernel, j, n) + ")";
      }
    }
    if (b.type != want)
      return argLabel(kernel, i, n) + ": buffer '" + b.name + "' is " +
             elemTypeName(b.type) + ", expected " + elemTypeName(want) + why;
  }
  // Row rules, over every argument each side of a rule stands for.
  for (int r = 0; r < d.numRules; ++r) {
    const RowRuleDecl &rule = d.rules[r];
    for (size_t i = 0; i < n; ++i) {
      if (argDeclAt(kernel, i, n) != &d.args[rule.lhs] ||
          args[i].kind != RefKind::Buffer)
        continue;
      BufferFacts a = buffer(args[i].index);
      bool exchange =
          rule.kind == RowRuleKind::Gathers || rule.kind == RowRuleKind::Routes;
      if (exchange && a.rows != RowsKind::Tokens)
        return argLabel(kernel, i, n) + ": buffer '" + a.name + "' has " +
               rowsKindName(a.rows) + " rows, expected Tokens";
      if (rule.kind == RowRuleKind::OnePerRow) {
        if (a.width != 1)
          return argLabel(kernel, i, n) + ": buffer '" + a.name + "' has " +
                 std::to_string(a.width) + " values per row, expected 1";
        continue;
      }
      for (size_t j = 0; j < n; ++j) {
        if (argDeclAt(kernel, j, n) != &d.args[rule.rhs] ||
            args[j].kind != RefKind::Buffer)
          continue;
        BufferFacts b = buffer(args[j].index);
        if (rule.kind == RowRuleKind::Gathers && b.rows != RowsKind::Gathered)
          return argLabel(kernel, j, n) + ": buffer '" + b.name + "' has " +
                 rowsKindName(b.rows) +
                 " rows, expected Gathered (the rows "
                 "of every rank of " +
                 argLabel(kernel, i, n) + ")";
        if (rule.kind == RowRuleKind::Routes && b.rows != RowsKind::Routed)
          return argLabel(kernel, j, n) + ": buffer '" + b.name + "' has " +
                 rowsKindName(b.rows) +
                 " rows, expected Routed (the rows this rank received for "
                 "the experts it holds)";
        bool rows = rule.kind == RowRuleKind::SameRows ||
                    rule.kind == RowRuleKind::Like;
        bool width = rule.kind == RowRuleKind::SameWidth ||
                     rule.kind == RowRuleKind::Like || exchange;
        if (rows && a.rows != b.rows)
          return argLabel(kernel, j, n) + ": buffer '" + b.name + "' has " +
                 rowsKindName(b.rows) + " rows but " + argLabel(kernel, i, n) +
                 " '" + a.name + "' has " + rowsKindName(a.rows);
        if (width && a.width != b.width)
          return argLabel(kernel, j, n) + ": buffer '" + b.name + "' has " +
                 std::to_string(b.width) + " values per row, expected " +
                 std::to_string(a.width) + " (as " + argLabel(kernel, i, n) +
                 " '" + a.name + "')";
      }
    }
  }
  if (!d.inPlace)
    for (size_t o = 0; o < n; ++o) {
      if (!argDeclAt(kernel, o, n)->output || args[o].kind != RefKind::Buffer)
        continue;
      for (size_t i = 0; i < n; ++i)
        if (!argDeclAt(kernel, i, n)->output &&
            args[i].kind == RefKind::Buffer && args[i].index == args[o].index)
          return argLabel(kernel, o, n) + ": is the same buffer as " +
                 argLabel(kernel, i, n) + ", but " + std::string(d.name) +
                 " cannot work in place";
    }
  return "";
}

} // namespace kiln::abi
