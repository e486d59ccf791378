//===- Glob.h - fnmatch-style globs over module names -----------*- C++ -*-===//
//
// Quark's `exclude` list holds fnmatch globs over Hugging Face module names.
// As in Python's fnmatch (which Quark uses), `*` matches any run of characters
// including '.', `?` one character, `[abc]` / `[a-z]` / `[!abc]` one character
// from (or not from) a set, and the whole name must match. So
// `*mlp.gate_proj` matches `model.layers.0.mlp.gate_proj` but not
// `model.layers.3.mlp.experts.5.gate_proj`.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_GLOB_H
#define KILN_FRONTENDS_GLM_GLOB_H

#include <string_view>

namespace kiln::glm {

/// True if `name` matches `pattern` in full. Runs in O(|pattern| * |name|)
/// worst case (no exponential backtracking). A '[' with no closing ']' is a
/// literal '['.
bool globMatch(std::string_view pattern, std::string_view name);

/// True if `pattern` uses any glob metacharacter (`*`, `?`, `[`).
bool isGlob(std::string_view pattern);

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_GLOB_H
