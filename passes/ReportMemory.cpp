//===- ReportMemory.cpp - What one rank holds in memory -------------------===//
//
// kiln-report-memory: the bytes of a plan-level module's weights, by group
// (from the checkpoint tensor names: routed experts, shared experts, MLA
// attention, the DSA indexer, dense MLPs, embedding and head, the rest),
// and of its KV caches per token, by owner (main model, MTP draft); then,
// for a device of `device-gb` GB, the tokens of KV that fit beside the
// weights. Under kiln-compile --tp/--ep each rank's module is its own share,
// so this is what each rank maps. Leaves the IR as it is.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/plan/IR/PlanOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <map>

namespace kiln {
#define GEN_PASS_DEF_KILNREPORTMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

constexpr std::array<const char *, 7> kGroups = {
    "routed experts", "shared experts", "attention (MLA)",
    "indexer",        "dense MLPs",     "embedding and head",
    "other"};

/// The group of a checkpoint tensor, by its name.
size_t groupOf(StringRef name) {
  if (name.contains("{e}"))
    return 0;
  if (name.contains("shared_experts"))
    return 1;
  if (name.contains(".indexer."))
    return 3;
  if (name.contains("self_attn."))
    return 2;
  if (name.contains(".mlp.gate_proj.") || name.contains(".mlp.up_proj.") ||
      name.contains(".mlp.down_proj."))
    return 4;
  if (name.contains("embed_tokens") || name.contains("lm_head"))
    return 5;
  return 6;
}

struct ReportMemoryPass
    : kiln::impl::KilnReportMemoryPassBase<ReportMemoryPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::array<double, kGroups.size()> bytes{};
    double total = 0;
    for (auto w : module.getOps<plan::WeightOp>()) {
      double b = w.getStoredBytes();
      bytes[groupOf(w.getSource())] += b;
      total += b;
    }
    std::map<std::string, std::pair<int64_t, int>> kv; // owner: bytes, caches
    int64_t kvTotal = 0;
    for (auto c : module.getOps<plan::CacheOp>()) {
      auto &entry = kv[c.getOwner().str()];
      entry.first += c.getRowBytes();
      entry.second += 1;
      kvTotal += c.getRowBytes();
    }
    llvm::raw_ostream &os = llvm::outs();
    const double gb = 1e9;
    os << "kiln-report-memory:" << (label.empty() ? "" : " ") << label << "\n";
    os << llvm::format("  %-28s %16.0f B %10.3f GB\n", "weights", total,
                       total / gb);
    for (size_t g = 0; g < kGroups.size(); ++g)
      if (bytes[g] > 0)
        os << llvm::format("    %-26s %16.0f B %10.3f GB\n", kGroups[g],
                           bytes[g], bytes[g] / gb);
    os << llvm::format("  %-28s %16lld B", "KV cache per token",
                       (long long)kvTotal);
    const char *sep = " (";
    for (auto &[owner, entry] : kv) {
      os << sep << owner << " " << entry.first << " B in " << entry.second
         << " caches";
      sep = ", ";
    }
    os << (kv.empty() ? "" : ")") << "\n";
    if (deviceGb > 0) {
      double left = deviceGb * gb - total;
      os << llvm::format("  %-28s %16.0f GB: ", "on a device of",
                         double(deviceGb));
      if (left <= 0)
        os << "the weights do not fit\n";
      else if (kvTotal > 0)
        os << llvm::format("%.3f GB left, %.0f tokens of KV cache\n", left / gb,
                           left / double(kvTotal));
      else
        os << llvm::format("%.3f GB left\n", left / gb);
    }
  }
};

} // namespace
