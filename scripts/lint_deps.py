#!/usr/bin/python3
"""Checks the dependency arrows between Kiln's layers, include by include.

  * runtime/ and the runtime tools (every tools/<name>/ whose CMakeLists.txt
    does not mention MLIR) include nothing from dialects/, passes/,
    frontends/, nor any LLVM/MLIR header;
  * dialects/ includes nothing from passes/, frontends/, runtime/;
  * the compiler (frontends/, passes/ and the tools that link MLIR) reaches
    runtime/ only through the artifact schema (SCHEMA below);
  * passes/ includes nothing from frontends/: weights come through
    support/TensorSource.h and the model's facts as ModelFacts
    (passes/emit/EmitArtifact.h),
    whatever the checkpoint format;
  * support/, the shared layer, includes nothing from dialects/, passes/,
    frontends/, runtime/, nor any LLVM/MLIR header. Every layer may include
    support/.

Usage: lint_deps.py [ROOT]   (default: the checkout holding this script)
Prints `file:line: #include <...>: reason` for each violation; exit status 1
on any finding.
"""
import os
import re
import sys

SOURCE_SUFFIXES = (".h", ".hpp", ".c", ".cc", ".cpp", ".inc", ".def")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
LLVM_PREFIXES = ("llvm/", "llvm-c/", "mlir/", "mlir-c/", "lld/", "clang/")

# What the compiler may include from runtime/: the artifact schema (the
# header flatc generates from kiln_artifact.fbs), its file header, the writer
# that streams it, the writers of its Plan and Cache tables and the codec of
# its Tokenizer table.
SCHEMA = {
    "runtime/artifact/kiln_artifact_generated.h",
    "runtime/artifact/ArtifactFormat.h",
    "runtime/artifact/ArtifactWriter.h",
    "runtime/artifact/KernelParamsFb.h",
    "runtime/artifact/PlanTable.h",
    "runtime/artifact/TokenizerTable.h",
}


def tool_links_mlir(tool_dir):
    """A tool whose CMakeLists.txt names MLIR outside comments is a compiler
    tool; any other tool is a runtime tool."""
    try:
        with open(os.path.join(tool_dir, "CMakeLists.txt"), encoding="utf-8") as f:
            code = "\n".join(line.split("#", 1)[0] for line in f)
    except OSError:
        return False
    return re.search(r"\bMLIR\b|KILN_MLIR_INCLUDES", code) is not None


def layer_of(rel, root):
    """runtime, dialects, support, compiler or None (not checked) for a source path."""
    parts = rel.split("/")
    if parts[0] == "runtime":
        return "runtime"
    if parts[0] == "dialects":
        return "dialects"
    if parts[0] == "support":
        return "support"
    if parts[0] in ("frontends", "passes"):
        return "compiler"
    if parts[0] == "tools" and len(parts) > 2:
        return "compiler" if tool_links_mlir(os.path.join(root, "tools", parts[1])) else "runtime"
    return None


def resolve(root, rel, target):
    """The repository path an include names: relative to the including file
    when such a file exists there (`../x.h`), else to the repository root
    (the include directory of every target)."""
    beside = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    if not beside.startswith("..") and os.path.isfile(os.path.join(root, beside)):
        return beside.replace(os.sep, "/")
    return os.path.normpath(target).replace(os.sep, "/")


def violation(layer, rel, target):
    """Why including `target` from `rel` breaks an arrow, or None."""
    top = target.split("/")[0] + "/"
    if layer == "runtime":
        if top in ("dialects/", "passes/", "frontends/"):
            return "the runtime includes nothing from the compiler"
        if target.startswith(LLVM_PREFIXES):
            return "the runtime includes no LLVM or MLIR header"
    elif layer == "dialects":
        if top in ("passes/", "frontends/", "runtime/"):
            return "dialects/ includes nothing from passes/, frontends/ or runtime/"
    elif layer == "support":
        if top in ("dialects/", "passes/", "frontends/", "runtime/"):
            return "support/ includes nothing from dialects/, passes/, frontends/ or runtime/"
        if target.startswith(LLVM_PREFIXES):
            return "support/ includes no LLVM or MLIR header"
    elif layer == "compiler":
        if top == "runtime/" and target not in SCHEMA:
            return "the compiler reaches runtime/ only through the artifact schema"
        if rel.startswith("passes/") and top == "frontends/":
            return ("passes/ includes nothing from frontends/ (weights: "
                    "support/TensorSource.h)")
    return None


def main(args):
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    for top in ("support", "runtime", "dialects", "frontends", "passes", "tools"):
        for dirpath, dirnames, names in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                layer = layer_of(rel, root)
                if layer is None:
                    continue
                with open(path, encoding="utf-8", errors="replace") as f:
                    for no, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, rel, m.group(2))
                        why = violation(layer, rel, target)
                        if why:
                            spelled = m.group(1) + m.group(2) + (">" if m.group(1) == "<" else '"')
                            problems.append(f"{rel}:{no}: #include {spelled}: {why}")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
