//===- GraphEmitter.h - Op emission helpers for the GLM graph ---*- C++ -*-===//
//
// Internal to the graph builder: one GraphEmitter per module, split over
// GraphBuilder.cpp (module, entry points) and GraphLayers.cpp (attention
// and MLP blocks). Errors are kept as the first Status and returned as
// failure(); the builder turns it into a diagnostic.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTENDS_GLM_GRAPHEMITTER_H
#define KILN_FRONTENDS_GLM_GRAPHEMITTER_H

#include "dialects/kiln/IR/KilnOps.h"
#include "frontends/glm/GraphBuilder.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringSet.h"

namespace kiln::glm {

/// The token-level arguments of the function being built.
struct TokenArgs {
  mlir::Value ids, seq, pos, rows;
};

class GraphEmitter {
public:
  GraphEmitter(mlir::ModuleOp module, const GlmConfig &config,
               const WeightSource &weights, const GraphOptions &options);

  const Status &error() const { return error_; }

  // Entry points (GraphBuilder.cpp).
  mlir::LogicalResult buildMain(llvm::StringRef name);
  mlir::LogicalResult buildDraft();

private:
  // Types and weights.
  mlir::RankedTensorType act(llvm::ArrayRef<int64_t> dims);
  mlir::Type elemType(Dtype dtype);
  mlir::Value weight(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                     mlir::Type elem);
  mlir::FailureOr<mlir::Value> plain(const std::string &name,
                                     llvm::ArrayRef<int64_t> shape);
  /// The rhs of a linear layer: a dense weight, or the dequantized value of
  /// an FP8 / MXFP4 one. `bias` receives the bias weight when asked.
  mlir::FailureOr<mlir::Value> linearWeight(const std::string &module,
                                            int64_t out, int64_t in,
                                            bool hasBias = false,
                                            mlir::Value *bias = nullptr);
  mlir::FailureOr<mlir::Value> linear(mlir::Value x, const std::string &module,
                                      int64_t out, int64_t in,
                                      bool hasBias = false);
  /// The per-expert tensors `<prefix>experts.{e}.<proj>` stacked.
  mlir::FailureOr<mlir::Value> expertStack(const std::string &prefix,
                                           llvm::StringRef proj, int64_t out,
                                           int64_t in);
  mlir::FailureOr<mlir::Value> rmsNorm(mlir::Value x, const std::string &name,
                                       int64_t dim);
  mlir::Value matmul(mlir::Value x, mlir::Value w, int64_t n);
  mlir::Value reshape(mlir::Value x, llvm::ArrayRef<int64_t> dims);
  mlir::Value add(mlir::Value a, mlir::Value b);
  /// Declares (once) a cache; returns its symbol name.
  std::string cache(const std::string &name, int64_t width);

  // Layers (GraphLayers.cpp).
  mlir::FailureOr<mlir::Value> decoderLayer(mlir::Value x, int64_t layer,
                                            mlir::Value &lastTopk);
  mlir::FailureOr<mlir::Value> mlaAttention(mlir::Value h, int64_t layer,
                                            mlir::Value &lastTopk);
  mlir::FailureOr<mlir::Value> indexer(mlir::Value h, mlir::Value cq,
                                       int64_t layer);
  mlir::FailureOr<mlir::Value> gqaAttention(mlir::Value h, int64_t layer);
  mlir::FailureOr<mlir::Value> denseMlp(mlir::Value h, const std::string &p,
                                        int64_t inter);
  mlir::FailureOr<mlir::Value> moeMlp(mlir::Value h, int64_t layer);
  mlir::Value rope(mlir::Value x, bool interleaved, int64_t offset,
                   int64_t dims);

  mlir::LogicalResult fail(Status status);

  mlir::ModuleOp module_;
  const GlmConfig &c_;
  const WeightSource &ws_;
  GraphOptions options_;
  mlir::OpBuilder b_;
  mlir::Location loc_;
  TokenArgs args_;
  llvm::StringSet<> caches_;
  Status error_;
};

} // namespace kiln::glm

#endif // KILN_FRONTENDS_GLM_GRAPHEMITTER_H
