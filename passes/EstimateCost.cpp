//===- EstimateCost.cpp - A plan step's predicted time on a GPU -----------===//
//
// kiln-estimate-cost: for one plan of the module (default `decode`), a
// batch of B sequences each holding `context` cached positions, and a chip
// (passes/CostModel.h), the bytes and FLOPs of every dispatch, their
// roofline time, a table by kernel, the slowest dispatches, and the step's
// total beside its bandwidth floor. Leaves the IR as it is.
//
// What each dispatch moves and computes (B rows, L = context + 1 keys per
// sequence in decode):
//  * every dispatch reads and writes its buffers (B rows, 4 bytes a value);
//  * matmul: its whole weight; 2 B N K FLOPs on the unit of its format
//    (FP8 block weights: the FP8 units without recorded launches or with
//    launches that quantize the activations to FP8, qa1; else BF16);
//  * embedding: B rows of the table;
//  * moe: the router, the shared expert, and the experts the batch reaches
//    (E_local (1 - (1 - k/E)^B) of them under uniform routing);
//    2 B k (E_local/E) 3 I H routed FLOPs;
//  * mla_attention: kv_b, and B x keys latent rows (keys = min(L, the
//    indexer's top-k)); absorbed attention on the vector units (the kernels
//    today: issue 18);
//  * indexer_top_k: B x L cached keys; 2 B L heads dim FLOPs (vector);
//  * gqa_attention: B x L rows of K and V;
//  * kv_append: writes B cache rows;
//  * all_reduce, all_gather_rows, reduce_scatter_rows: their buffers only
//    (the link between GPUs is not modelled; gathered rows count as B).
//
// With the launches kiln-lower-gpu-launches records, each costs its launch
// time, and a dispatch whose widest launch has W workgroups, fewer than the
// chip's C compute units, runs at W / C of the roofline (grid axes
// evaluated at B rows, also for axes that count another argument's rows).
//
//===----------------------------------------------------------------------===//

#include "passes/CostModel.h"
#include "passes/Passes.h"

#include "dialects/plan/IR/PlanOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace kiln {
#define GEN_PASS_DEF_KILNESTIMATECOSTPASS
#include "passes/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::plan;
using cost::Unit;

namespace {

int64_t product(ArrayRef<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return n;
}

/// The matrix units a weight's GEMM runs on. FP8 block weights: the FP8
/// units when the kernels quantize the activations to FP8 (`fp8Mfma`),
/// else the BF16 units they are decoded for.
Unit unitOf(WeightOp w, bool fp8Mfma) {
  switch (w.getKind()) {
  case WeightKind::fp8_block:
    return fp8Mfma ? Unit::Fp8Mfma : Unit::Bf16Mfma;
  case WeightKind::mxfp4_raw:
  case WeightKind::mxfp4_quant:
    return Unit::Mxfp4Mfma;
  case WeightKind::dense:
  case WeightKind::mxfp4_dequant:
    break;
  }
  return w.getDtype().isF32() ? Unit::Vector : Unit::Bf16Mfma;
}

/// Values of one matrix (one expert of a stack).
double matrixValues(WeightOp w) {
  int64_t n = product(w.getShape());
  return double(w.getExperts() > 0 ? n / w.getShape()[0] : n);
}

double weightBytes(WeightOp w) { return w.getStoredBytes(); }

struct Estimator {
  SymbolTable &symbols; // the module's weights and caches
  int64_t batch, context;

  /// One dispatch argument: a buffer, a weight, a cache, or none.
  struct Arg {
    BufferOp buffer;
    WeightOp weight;
    CacheOp cache;
  };

  std::vector<Arg> argsOf(DispatchOp d) const {
    std::vector<Arg> out;
    for (Attribute a : d.getArgs()) {
      Arg arg;
      if (auto index = dyn_cast<IntegerAttr>(a))
        arg.buffer = d.getBuffers()[index.getInt()].getDefiningOp<BufferOp>();
      else if (auto sym = dyn_cast<FlatSymbolRefAttr>(a)) {
        Operation *op = symbols.lookup(sym.getValue());
        arg.weight = dyn_cast_or_null<WeightOp>(op);
        arg.cache = dyn_cast_or_null<CacheOp>(op);
      }
      out.push_back(arg);
    }
    return out;
  }

  double rows(BufferOp b) const {
    return b.getRows() == Rows::one ? 1.0 : double(batch);
  }
  double bufferBytes(BufferOp b) const {
    return rows(b) * double(b.getRowElems()) * 4;
  }
  static double cacheRowBytes(CacheOp c) { return double(c.getRowBytes()); }
  /// Keys each sequence attends to in one decode step.
  double keys() const { return double(context + 1); }

  /// Whether the dispatch's FP8 GEMMs run on the FP8 units: without
  /// recorded launches the weights' own unit; with them, whether a launch
  /// is a kernel with FP8 activations (its symbol spells qa1,
  /// passes/codegen/rocdl/KernelParams.def).
  static bool fp8Mfma(DispatchOp d) {
    ArrayAttr launches = d.getGpuLaunchesAttr();
    if (!launches)
      return true;
    for (Attribute a : launches)
      if (auto launch = dyn_cast<GpuLaunchAttr>(a)) {
        StringRef rest = launch.getKernel();
        while (!rest.empty()) {
          auto [tag, tail] = rest.split('_');
          if (tag == "qa1")
            return true;
          rest = tail;
        }
      }
    return false;
  }

  cost::Work work(DispatchOp d) const {
    std::vector<Arg> args = argsOf(d);
    const bool fp8 = fp8Mfma(d);
    auto unitOf = [&](WeightOp w) { return ::unitOf(w, fp8); };
    cost::Work w;
    double outValues = 0; // of the last buffer argument: the output
    for (Arg a : args)
      if (a.buffer) {
        w.bytes += bufferBytes(a.buffer);
        outValues = rows(a.buffer) * double(a.buffer.getRowElems());
      }
    const double b = double(batch);
    StringRef k = d.getKernel();
    auto param = [&](StringRef name) -> double {
      Attribute a = d.getParams().get(name);
      if (auto i = dyn_cast_or_null<IntegerAttr>(a))
        return double(i.getInt());
      return 0;
    };
    if (k == "matmul") {
      WeightOp wt = args[1].weight;
      w.bytes += weightBytes(wt);
      w.add(unitOf(wt), 2 * b * matrixValues(wt));
    } else if (k == "embedding") {
      WeightOp wt = args[1].weight;
      w.bytes += b * double(wt.getShape().back()) * wt.getBytesPerValue();
    } else if (k == "moe") {
      WeightOp router = args[1].weight, gate = args[3].weight;
      const double experts = double(router.getShape()[0]);
      const double local = double(gate.getShape()[0]);
      const double topK = param("top_k");
      const double reached = local * (1 - std::pow(1 - topK / experts, b));
      w.bytes += weightBytes(router);
      if (args[2].weight)
        w.bytes += weightBytes(args[2].weight);
      w.add(unitOf(router), 2 * b * matrixValues(router));
      for (int i = 3; i <= 5; ++i) {
        WeightOp e = args[i].weight;
        w.bytes += reached * matrixValues(e) * e.getBytesPerValue();
        w.add(unitOf(e), 2 * b * topK * (local / experts) * matrixValues(e));
      }
      for (int i = 6; i <= 8; ++i)
        if (WeightOp s = args[i].weight) {
          w.bytes += weightBytes(s);
          w.add(unitOf(s), 2 * b * matrixValues(s));
        }
    } else if (k == "mla_attention") {
      BufferOp qNope = args[0].buffer, out = args[7].buffer;
      WeightOp kvB = args[2].weight;
      CacheOp latent = args[3].cache;
      const double heads = param("heads");
      const double nope = double(qNope.getRowElems()) / heads;
      const double value = double(out.getRowElems()) / heads;
      const double rank = double(kvB.getShape().back());
      double attended = keys();
      if (BufferOp topK = args[6].buffer)
        attended = std::min(attended, double(topK.getRowElems()));
      w.bytes += weightBytes(kvB) + b * attended * cacheRowBytes(latent);
      // Absorb q into the latent space, score, weigh, project out.
      w.add(Unit::Vector,
            2 * b * heads *
                (nope * rank + attended * double(latent.getWidth()) +
                 attended * rank + rank * value));
    } else if (k == "indexer_top_k") {
      CacheOp keysCache = args[2].cache;
      w.bytes += b * keys() * cacheRowBytes(keysCache);
      w.add(Unit::Vector,
            2 * b * keys() * param("heads") * double(keysCache.getWidth()));
    } else if (k == "gqa_attention") {
      CacheOp kc = args[1].cache, vc = args[2].cache;
      w.bytes += b * keys() * (cacheRowBytes(kc) + cacheRowBytes(vc));
      // Scores and the weighted sum: 2 x 2 FLOPs per (query head, key,
      // head dimension).
      w.add(Unit::Vector,
            2 * 2 * b * keys() * double(args[0].buffer.getRowElems()));
    } else if (k == "kv_append") {
      w.bytes += b * cacheRowBytes(args[0].cache);
    } else {
      // Row kernels: their weights (norm scales, ...) and one operation
      // per value written.
      for (Arg a : args)
        if (a.weight)
          w.bytes += weightBytes(a.weight);
      w.add(Unit::Vector, outValues);
    }
    return w;
  }
};

/// Workgroups of the dispatch's widest launch at `rows` rows; 0 without
/// recorded launches.
int64_t widestLaunch(ArrayAttr launches, int64_t rows) {
  int64_t widest = 0;
  if (!launches)
    return 0;
  for (Attribute a : launches) {
    auto launch = dyn_cast<GpuLaunchAttr>(a);
    if (!launch)
      continue;
    ArrayRef<int64_t> grid = launch.getGrid();
    int64_t n = 1;
    for (size_t i = 0; i + GpuLaunchAttr::kAxisFields <= grid.size();
         i += GpuLaunchAttr::kAxisFields) {
      int64_t mul = grid[i], add = grid[i + 1],
              div = std::max<int64_t>(1, grid[i + 2]);
      n *= std::max<int64_t>(1, (rows * mul + add + div - 1) / div);
    }
    widest = std::max(widest, n);
  }
  return widest;
}

struct Row {
  int count = 0;
  double bytes = 0, flops = 0, seconds = 0;
};

struct EstimateCostPass
    : kiln::impl::KilnEstimateCostPassBase<EstimateCostPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const cost::Chip *chipSpec = cost::chipNamed(chip.getValue());
    if (!chipSpec) {
      module.emitError() << "kiln-estimate-cost: unknown chip '"
                         << chip.getValue()
                         << "' (the model knows gfx950 and gfx942)";
      return signalPassFailure();
    }
    if (batch < 1 || context < 0) {
      module.emitError() << "kiln-estimate-cost: batch must be >= 1 and "
                            "context >= 0";
      return signalPassFailure();
    }
    PlanOp planOp;
    for (auto p : module.getOps<PlanOp>())
      if (p.getSymName() == plan.getValue())
        planOp = p;
    if (!planOp) {
      module.emitError() << "kiln-estimate-cost: the module has no plan @"
                         << plan.getValue();
      return signalPassFailure();
    }
    report(module, planOp, *chipSpec);
  }

  /// What a dispatch works on: its first weight's source tensor, else its
  /// first cache, else its location.
  static std::string label(const Estimator &est, DispatchOp d) {
    for (Estimator::Arg a : est.argsOf(d)) {
      if (a.weight)
        return a.weight.getSource().str();
      if (a.cache)
        return "@" + a.cache.getSymName().str();
    }
    std::string loc;
    llvm::raw_string_ostream os(loc);
    os << d.getLoc();
    return loc;
  }

  void report(ModuleOp module, PlanOp planOp, const cost::Chip &c) {
    SymbolTable symbols(module);
    Estimator est{symbols, batch, context};
    std::map<std::string, Row> byKernel;
    struct Slow {
      double seconds;
      std::string what;
    };
    std::vector<Slow> slow;
    Row total;
    double launchS = 0;
    std::array<double, cost::kUnits> unitFlops = {};
    int launches = 0;
    for (auto d : planOp.getBody().front().getOps<DispatchOp>()) {
      cost::Work w = est.work(d);
      // One launch each unless kiln-lower-gpu-launches said how many.
      ArrayAttr gpu = d.getGpuLaunchesAttr();
      const int64_t widest = widestLaunch(gpu, batch);
      const double occupancy =
          widest > 0 ? std::min(1.0, double(widest) / c.computeUnits) : 1.0;
      cost::Time t = cost::predict(c, w, occupancy);
      const int n = gpu ? int(gpu.size()) : 1;
      t.launchS *= n;
      launches += n;
      double flops = 0;
      for (int u = 0; u < cost::kUnits; ++u) {
        flops += w.flops[u];
        unitFlops[u] += w.flops[u];
      }
      Row &r = byKernel[d.getKernel().str()];
      for (Row *x : {&r, &total}) {
        ++x->count;
        x->bytes += w.bytes;
        x->flops += flops;
        x->seconds += t.totalS();
      }
      launchS += t.launchS;
      std::string what;
      llvm::raw_string_ostream os(what);
      os << d.getKernel() << " " << label(est, d) << " ("
         << (t.memoryBound() ? "memory" : "compute") << "-bound, "
         << llvm::format("%.2f", w.bytes / 1e6) << " MB, "
         << llvm::format("%.3f", flops / 1e9) << " GFLOP";
      if (occupancy < 1)
        os << ", " << widest << " workgroups for " << c.computeUnits << " CUs";
      os << ")";
      slow.push_back({t.totalS(), what});
    }
    llvm::raw_ostream &os = llvm::outs();
    os << "kiln-estimate-cost: plan @" << plan << " on " << c.name << " ("
       << c.product << "), batch " << batch << ", context " << context
       << ": a roofline prediction, not a measurement\n";
    os << llvm::format("%-16s %6s %12s %12s %12s %7s\n", "kernel", "count",
                       "HBM MB", "GFLOP", "time us", "share");
    for (const auto &[name, r] : byKernel)
      os << llvm::format("%-16s %6d %12.2f %12.3f %12.1f %6.1f%%\n",
                         name.c_str(), r.count, r.bytes / 1e6, r.flops / 1e9,
                         r.seconds * 1e6, 100 * r.seconds / total.seconds);
    os << "flops by unit:";
    for (int u = 0; u < cost::kUnits; ++u)
      os << " " << cost::unitName(Unit(u)) << " "
         << llvm::format("%.3f", unitFlops[u] / 1e9) << " GFLOP";
    os << "\n";
    const double floorS = total.bytes / c.hbmBytesPerS;
    os << llvm::format(
        "step: %d dispatches, %.2f MB, predicted %.1f us (%.1f us of it "
        "%d launches), %.1f tok/s; bandwidth floor %.1f us (%.1f%% of the "
        "step)\n",
        total.count, total.bytes / 1e6, total.seconds * 1e6, launchS * 1e6,
        launches, double(batch) / total.seconds, floorS * 1e6,
        100 * floorS / total.seconds);
    std::stable_sort(
        slow.begin(), slow.end(),
        [](const Slow &a, const Slow &b) { return a.seconds > b.seconds; });
    os << "slowest dispatches:\n";
    for (size_t i = 0; i < slow.size() && i < size_t(top); ++i)
      os << llvm::format("  %8.1f us  ", slow[i].seconds * 1e6) << slow[i].what
         << "\n";
  }
};

} // namespace
