//===- Attention.h - The attention-side CPU kernels -------------*- C++ -*-===//
//
// Umbrella header for KilnCpuAttention: paged KV-cache rows, RoPE, absorbed
// MLA with optional DSA selection, the DSA lightning indexer, GQA. Kernels
// take shapes the plan has already validated and return nothing; allocation
// problems surface as Status from Workspace::reserve and PagedKvCache.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_CPU_ATTENTION_ATTENTION_H
#define KILN_RUNTIME_CPU_ATTENTION_ATTENTION_H

#include "runtime/cpu/attention/Gqa.h"
#include "runtime/cpu/attention/Indexer.h"
#include "runtime/cpu/attention/KvCache.h"
#include "runtime/cpu/attention/Mla.h"
#include "runtime/cpu/attention/PagedKvCache.h"
#include "runtime/cpu/attention/Rope.h"
#include "runtime/cpu/attention/Workspace.h"

#endif // KILN_RUNTIME_CPU_ATTENTION_ATTENTION_H
