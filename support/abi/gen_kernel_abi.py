#!/usr/bin/python3
"""Generates the kernel contract's code from support/abi/Kernels.td.

Usage: gen_kernel_abi.py RECORDS.json {header|fbs|fb-header} OUT

RECORDS.json is `llvm-tblgen --dump-json Kernels.td`. The outputs:
  header     support/abi/KernelContract.h (plain C++17, no FlatBuffers)
  fbs        runtime/artifact/KernelParams.fbs (included by the schema)
  fb-header  runtime/artifact/KernelParamsFb.h (structs <-> the union)

Kernels are numbered in the order Kernels.td declares them.
"""
import json
import re
import sys

CPP_TYPES = {"i64": "int64_t", "f32": "float", "bool": "bool"}
FBS_TYPES = {"i64": "long", "f32": "float", "bool": "bool"}
ARG_TYPES = {"any": "Any", "f32": "F32", "i32": "I32"}
RULE_KINDS = {"same_rows": "SameRows", "same_width": "SameWidth",
              "one_per_row": "OnePerRow", "like": "Like",
              "gathers": "Gathers", "routes": "Routes"}


def fail(message):
    sys.stderr.write("gen_kernel_abi.py: Kernels.td: " + message + "\n")
    sys.exit(1)


def location_of(record):
    """(file, line) of a record's definition."""
    path, line = record["!locs"][0].rsplit(":", 1)
    return path, int(line)


def camel(snake):
    return "".join(part.capitalize() for part in snake.split("_"))


def c_string(text):
    return json.dumps(text)


def load(path):
    with open(path, encoding="utf-8") as f:
        records = json.load(f)
    kernels = []
    for name in records["!instanceof"].get("Kernel", []):
        rec = records[name]
        args = [records[a["def"]] for a in rec["args"]]
        params = [records[p["def"]] for p in rec["params"]]
        rules = [records[r["def"]] for r in rec["rows"]]
        kernels.append({
            "def": name,
            "name": rec["name"],
            "file": location_of(rec)[0],
            "line": location_of(rec)[1],
            "summary": rec["summary"],
            "in_place": bool(rec["inPlace"]),
            "op": rec["op"],
            "rules": [{"kind": r["kind"], "lhs": r["lhs"], "rhs": r["rhs"]}
                      for r in rules],
            "args": [{
                "name": a["name"],
                "kinds": a["kinds"],
                "dtype": a["dtype"],
                "optional": bool(a["optional"]),
                "output": bool(a["output"]),
                "variadic": bool(a["variadic"]),
                "panels": bool(a["panels"]),
            } for a in args],
            "params": [{
                "name": p["name"],
                "type": p["type"],
                "doc": p["doc"],
            } for p in params],
        })
    files = sorted(set(k["file"] for k in kernels))
    if len(files) > 1:
        fail("kernels are declared in %s: declare them in one file, whose order "
             "numbers them" % ", ".join(files))
    kernels.sort(key=lambda k: k["line"])
    check(kernels)
    return kernels


def check(kernels):
    names = set()
    for k in kernels:
        where = "kernel '%s'" % k["name"]
        if k["name"] in names:
            fail(where + ": declared twice")
        names.add(k["name"])
        if not re.fullmatch(r"[a-z][a-z0-9_]*", k["name"]):
            fail(where + ": names are snake_case")
        arg_names = [a["name"] for a in k["args"]]
        if len(set(arg_names)) != len(arg_names):
            fail(where + ": two arguments share a name")
        if sum(a["variadic"] for a in k["args"]) > 1:
            fail(where + ": at most one variadic argument")
        for a in k["args"]:
            if not a["kinds"] or set(a["kinds"]) - set("BWC"):
                fail(where + ": argument '%s': kinds are B, W and C" % a["name"])
            dtype = a["dtype"]
            if dtype.startswith("like:"):
                if dtype[5:] not in arg_names or dtype[5:] == a["name"]:
                    fail(where + ": argument '%s': %s names no other argument"
                         % (a["name"], dtype))
            elif dtype not in ARG_TYPES:
                fail(where + ": argument '%s': unknown dtype %s" % (a["name"], dtype))
            if a["variadic"] and a["optional"]:
                fail(where + ": argument '%s' is both variadic and optional" % a["name"])
        for r in k["rules"]:
            for side in ("lhs", "rhs"):
                if r[side] not in arg_names:
                    fail(where + ": row rule %s names no argument '%s'"
                         % (r["kind"], r[side]))
            if r["kind"] not in RULE_KINDS:
                fail(where + ": unknown row rule %s" % r["kind"])
        if k["op"]:
            outputs = [a["output"] for a in k["args"]]
            if True in outputs and False in outputs[outputs.index(True):]:
                fail(where + ": op %s: the outputs must follow the inputs for the "
                     "plan builder's own lowering" % k["op"])
        pnames = [p["name"] for p in k["params"]]
        if len(set(pnames)) != len(pnames):
            fail(where + ": two parameters share a name")
        for p in k["params"]:
            if p["type"] not in CPP_TYPES:
                fail(where + ": parameter '%s': unknown type %s" % (p["name"], p["type"]))


def params_struct(k):
    return k["def"] + "Params"


def with_params(kernels):
    return [k for k in kernels if k["params"]]


def kernel_switch(kernels, case, default):
    """`switch (kernel)` lines: `case(k)` returns each kernel with
    parameters' body, `default` the body for the others."""
    out = ["  switch (kernel) {"]
    for k in with_params(kernels):
        out.append("  case Kernel::%s:\n    %s" % (k["def"], case(k)))
    out.append("  default:\n    %s\n  }\n}\n" % default)
    return out


HEADER_TOP = """\
//===- KernelContract.h - Generated from support/abi/Kernels.td -*- C++ -*-===//
//
// Generated by support/abi/gen_kernel_abi.py at build time. Do not edit:
// change Kernels.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SUPPORT_ABI_KERNELCONTRACT_H
#define KILN_SUPPORT_ABI_KERNELCONTRACT_H

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <variant>

namespace kiln::abi {
"""


def gen_header(kernels):
    out = [HEADER_TOP]
    out.append("enum class Kernel : uint8_t {")
    for k in kernels:
        out.append("  %s, // %s" % (k["def"], k["name"]))
    out.append("  Count,\n};\n")
    out.append("/// Names as stored in the artifact's kernel table.")
    out.append("inline constexpr std::string_view kKernelNames[] = {")
    for k in kernels:
        out.append("    %s," % c_string(k["name"]))
    out.append("};\n")
    out.append("""\
/// What an argument may refer to (a mask of these bits).
enum ArgKindBit : uint8_t { kArgBuffer = 1, kArgWeight = 2, kArgCache = 4 };
/// A buffer argument's element type; Like: that of argument `like`.
enum class ArgType : uint8_t { Any, F32, I32, Like };
struct ArgDecl {
  const char *name;
  uint8_t kinds;
  ArgType type;
  int8_t like; // argument index when type == Like, else -1
  bool optional, output, variadic;
  /// A weight the kernel also reads in the CPU row-panel layout
  /// (WeightLayout DensePanel4: runtime/cpu/Types.h, WeightView::panelRows).
  bool panels;
};
enum class ParamType : uint8_t { I64, F32, Bool };
struct ParamDecl {
  const char *name;
  ParamType type;
  const char *doc;
};
/// A rule between two buffer arguments (declaration indices).
enum class RowRuleKind : uint8_t {
  SameRows,
  SameWidth,
  OnePerRow,
  Like,
  Gathers,
  Routes
};
struct RowRuleDecl {
  RowRuleKind kind;
  int8_t lhs, rhs;
};
struct KernelDecl {
  std::string_view name;
  const ArgDecl *args;
  uint8_t numArgs;
  const ParamDecl *params;
  uint8_t numParams;
  const RowRuleDecl *rules;
  uint8_t numRules;
  bool inPlace;   // an output may share a buffer with an input
  const char *op; // the kiln op lowered to it by operand order, or ""
  const char *summary;
};
""")
    # Parameter structs.
    for k in with_params(kernels):
        out.append("/// Parameters of %s." % k["name"])
        out.append("struct %s {" % params_struct(k))
        for p in k["params"]:
            init = "false" if p["type"] == "bool" else "0"
            doc = ("  // " + p["doc"]) if p["doc"] else ""
            out.append("  %s %s = %s;%s" % (CPP_TYPES[p["type"]], camel_lower(p["name"]), init, doc))
        out.append("};")
    out.append("")
    alts = ["std::monostate"] + [params_struct(k) for k in with_params(kernels)]
    out.append("/// One dispatch's parameters: std::monostate for kernels without.")
    out.append("using Params = std::variant<%s>;\n" % ",\n                            ".join(alts))
    out.append("/// The Params alternative of each kernel.")
    out.append("inline constexpr uint8_t kParamsIndex[] = {")
    index = {params_struct(k): i + 1 for i, k in enumerate(with_params(kernels))}
    for k in kernels:
        out.append("    %d, // %s" % (index.get(params_struct(k), 0), k["name"]))
    out.append("};\n")
    out.append("template <Kernel K> struct ParamsOf {\n  using type = std::monostate;\n};")
    for k in with_params(kernels):
        out.append("template <> struct ParamsOf<Kernel::%s> {\n  using type = %s;\n};"
                   % (k["def"], params_struct(k)))
    out.append("")
    # Field visitors.
    out.append("/// Calls f(name, field) for each parameter, in declared order.")
    out.append("template <typename F> void visitFields(const std::monostate &, F &&) {}")
    out.append("template <typename F> void visitFields(std::monostate &, F &&) {}")
    for k in with_params(kernels):
        for const in ("const ", ""):
            out.append("template <typename F> void visitFields(%s%s &p, F &&f) {"
                       % (const, params_struct(k)))
            for p in k["params"]:
                out.append("  f(%s, p.%s);" % (c_string(p["name"]), camel_lower(p["name"])))
            out.append("}")
    out.append("/// Kernel `kernel`'s parameter struct, every field zero.")
    out.append("inline Params defaultParams(Kernel kernel) {")
    out += kernel_switch(kernels, lambda k: "return %s{};" % params_struct(k),
                         "return std::monostate();")
    out.append("template <typename F> void forEachParam(const Params &p, F &&f) {")
    out.append("  std::visit([&](const auto &s) { visitFields(s, f); }, p);\n}\n")
    # Declaration tables.
    out.append("namespace detail {")
    for k in kernels:
        names = [a["name"] for a in k["args"]]
        out.append("inline constexpr ArgDecl k%sArgs[] = {" % k["def"])
        for a in k["args"]:
            kinds = " | ".join({"B": "kArgBuffer", "W": "kArgWeight", "C": "kArgCache"}[c]
                               for c in a["kinds"])
            if a["dtype"].startswith("like:"):
                atype, like = "ArgType::Like", names.index(a["dtype"][5:])
            else:
                atype, like = "ArgType::" + ARG_TYPES[a["dtype"]], -1
            out.append("    {%s, %s, %s, %d, %s, %s, %s, %s}," % (
                c_string(a["name"]), kinds, atype, like,
                bool_str(a["optional"]), bool_str(a["output"]), bool_str(a["variadic"]),
                bool_str(a["panels"])))
        out.append("};")
        if k["rules"]:
            out.append("inline constexpr RowRuleDecl k%sRules[] = {" % k["def"])
            for r in k["rules"]:
                out.append("    {RowRuleKind::%s, %d, %d}," % (
                    RULE_KINDS[r["kind"]], names.index(r["lhs"]), names.index(r["rhs"])))
            out.append("};")
        if k["params"]:
            out.append("inline constexpr ParamDecl k%sParams[] = {" % k["def"])
            for p in k["params"]:
                out.append("    {%s, ParamType::%s, %s}," % (
                    c_string(p["name"]), {"i64": "I64", "f32": "F32", "bool": "Bool"}[p["type"]],
                    c_string(p["doc"])))
            out.append("};")
    out.append("} // namespace detail\n")
    out.append("inline constexpr KernelDecl kKernels[] = {")
    for k in kernels:
        params = ("detail::k%sParams" % k["def"]) if k["params"] else "nullptr"
        rules = ("detail::k%sRules" % k["def"]) if k["rules"] else "nullptr"
        out.append("    {%s, detail::k%sArgs, %d, %s, %d, %s, %d, %s, %s, %s}," % (
            c_string(k["name"]), k["def"], len(k["args"]), params, len(k["params"]),
            rules, len(k["rules"]), bool_str(k["in_place"]), c_string(k["op"]),
            c_string(k["summary"])))
    out.append("};")
    out.append("""
inline const KernelDecl &declOf(Kernel kernel) {
  return kKernels[size_t(kernel)];
}

inline bool kernelFromName(std::string_view name, Kernel &out) {
  for (size_t i = 0; i < size_t(Kernel::Count); ++i)
    if (kKernelNames[i] == name) {
      out = Kernel(i);
      return true;
    }
  return false;
}

/// The kernel the plan builder lowers op `opName` to by operand order.
inline bool kernelForOp(std::string_view opName, Kernel &out) {
  for (size_t i = 0; i < size_t(Kernel::Count); ++i)
    if (kKernels[i].op == opName) {
      out = Kernel(i);
      return true;
    }
  return false;
}

/// Whether `params` holds kernel `kernel`'s parameter struct.
inline bool paramsMatch(Kernel kernel, const Params &params) {
  return params.index() == kParamsIndex[size_t(kernel)];
}

} // namespace kiln::abi

#endif // KILN_SUPPORT_ABI_KERNELCONTRACT_H""")
    return "\n".join(out) + "\n"


def camel_lower(snake):
    c = camel(snake)
    return c[0].lower() + c[1:]


def bool_str(b):
    return "true" if b else "false"


def gen_fbs(kernels):
    out = ["// Generated by support/abi/gen_kernel_abi.py from support/abi/Kernels.td.",
           "// Do not edit: change Kernels.td.", "", "namespace kiln.fb;", ""]
    for k in with_params(kernels):
        out.append("/// Parameters of %s." % k["name"])
        out.append("table %s {" % params_struct(k))
        for p in k["params"]:
            out.append("  %s: %s;" % (p["name"], FBS_TYPES[p["type"]]))
        out.append("}")
        out.append("")
    out.append("/// A dispatch's parameters: the table of its kernel, NONE for kernels")
    out.append("/// without parameters.")
    out.append("union KernelParams {")
    for k in with_params(kernels):
        out.append("  %s," % params_struct(k))
    out.append("}")
    return "\n".join(out) + "\n"


def gen_fb_header(kernels):
    out = ["""\
//===- KernelParamsFb.h - Generated from support/abi/Kernels.td -*- C++ -*-===//
//
// Generated by support/abi/gen_kernel_abi.py at build time. Do not edit:
// change Kernels.td. Converts abi::Params to and from the artifact's
// KernelParams union (Dispatch.params).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_ARTIFACT_KERNELPARAMSFB_H
#define KILN_RUNTIME_ARTIFACT_KERNELPARAMSFB_H

#include "runtime/artifact/kiln_artifact_generated.h"
#include "support/abi/KernelContract.h"

namespace kiln::abi {

/// The union tag kernel `kernel`'s parameters are stored under.
inline fb::KernelParams paramsTag(Kernel kernel) {"""]
    out += kernel_switch(
        kernels, lambda k: "return fb::KernelParams::%s;" % params_struct(k),
        "return fb::KernelParams::NONE;")
    out.append("/// Writes `params`; returns the union tag and the table (0 for none).")
    out.append("inline std::pair<fb::KernelParams, flatbuffers::Offset<void>>")
    out.append("writeParams(flatbuffers::FlatBufferBuilder &fbb, const Params &params) {")
    out.append("  switch (params.index()) {")
    for i, k in enumerate(with_params(kernels)):
        s = params_struct(k)
        fields = ", ".join("p.%s" % camel_lower(p["name"]) for p in k["params"])
        out.append("  case %d: {" % (i + 1))
        out.append("    const auto &p = std::get<%s>(params);" % s)
        out.append("    return {fb::KernelParams::%s, fb::Create%s(fbb, %s).Union()};" % (s, s, fields))
        out.append("  }")
    out.append("  default:\n    return {fb::KernelParams::NONE, 0};\n  }\n}\n")
    out.append("/// Reads a dispatch's parameters as kernel `kernel` declares them: false")
    out.append("/// when the dispatch holds another kernel's table, or none where one is due.")
    out.append("inline bool readParams(Kernel kernel, const fb::Dispatch &d, Params &out) {")
    out.append("  if (d.params_type() != paramsTag(kernel))\n    return false;")
    out.append("  switch (kernel) {")
    for k in with_params(kernels):
        s = params_struct(k)
        out.append("  case Kernel::%s: {" % k["def"])
        out.append("    const fb::%s *t = d.params_as_%s();" % (s, s))
        out.append("    if (!t)\n      return false;")
        out.append("    %s p;" % s)
        for p in k["params"]:
            out.append("    p.%s = t->%s();" % (camel_lower(p["name"]), p["name"]))
        out.append("    out = p;\n    return true;\n  }")
    out.append("  default:\n    out = std::monostate();\n    return true;\n  }\n}\n")
    out.append("} // namespace kiln::abi\n\n#endif // KILN_RUNTIME_ARTIFACT_KERNELPARAMSFB_H")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("header", "fbs", "fb-header"):
        sys.stderr.write(__doc__)
        return 2
    kernels = load(sys.argv[1])
    text = {"header": gen_header, "fbs": gen_fbs, "fb-header": gen_fb_header}[sys.argv[2]](kernels)
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
