//===- KilnOps.td - kiln dialect ops -----------------------*- tablegen -*-===//
//
// Shapes: T is the dynamic token count of the chunk being processed, H the
// hidden size, V the vocabulary, E the routed-expert count. Linear layers use
// the Hugging Face layout: weights are [out, in] and y = x * w^T.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPS_TD
#define KILN_OPS_TD

include "dialects/kiln/IR/KilnDialect.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Kiln_Tensor : RankedTensorOf<[AnyType]>;
def Kiln_FloatTensor : RankedTensorOf<[AnyFloat]>;
def Kiln_IntTensor : RankedTensorOf<[AnySignlessInteger]>;

// Ops whose operands and result share one shape and element type.
class Kiln_UnaryOp<string mnemonic, string summaryText, string math>
    : Kiln_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = summaryText;
  let description = "Elementwise `" # math # "`, computed in FP32.\n\n"
    # "```mlir\n%y = kiln." # mnemonic # " %x : tensor<?x64xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

def Kiln_WeightOp : Kiln_Op<"weight", [Pure]> {
  let summary = "names an external weight tensor";
  let description = [{
    The tensor's data lives in the checkpoint (and later in the artifact's
    weight segments), never in the IR. `name` is the checkpoint tensor name.
    A name containing `{e}` stands for the per-expert tensors
    `...experts.0...`, `...experts.1...` stacked along a new leading
    dimension whose size is the expert count.

    The result type is the logical shape and element type: E2M1 values are
    `f4E2M1FN` (stored two per byte), E8M0 scales `f8E8M0FNU`. `encoding`
    says how the bytes are produced: `raw` (as in the checkpoint), or
    quantized by Kiln from the named float tensor. `source_scale` names the
    block-scale tensor of an FP8 source being re-quantized, or, on a raw f32
    weight, the scales of an FP8 or Quark MXFP4 source dequantized at compile
    time (q * s in f32, what the CPU kernels compute from the quantized
    bytes). An expert stack
    with `experts_from F` holds experts F, F+1, ... (one rank's share under
    expert parallelism); without it, experts 0, 1, ... With `slice [A, F]`
    the tensor holds rows (A = 0) or columns (A = 1) F, F+1, ... of each
    checkpoint matrix (elements F, F+1, ... of a vector, A = 0), in the
    result's own coordinates (a scale tensor's slice counts scale blocks),
    as many as the result type says: one rank's share under tensor
    parallelism.

    ```mlir
    %w = kiln.weight "model.embed_tokens.weight" : tensor<2048x256xbf16>
    %q = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight"
           encoding <mxfp4_values, even> : tensor<16x128x256xf4E2M1FN>
    ```
  }];
  let arguments = (ins StrAttr:$name, Kiln_EncodingAttr:$encoding,
                       OptionalAttr<StrAttr>:$source_scale,
                       OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$first_expert,
                       OptionalAttr<DenseI64ArrayAttr>:$slice);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $name custom<DefaultEncoding>($encoding) (`source_scale` $source_scale^)?
    (`experts_from` $first_expert^)? (`slice` $slice^)? attr-dict `:`
    type($result)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// True when the name stands for per-expert tensors stacked on dim 0.
    bool isExpertStack() { return getName().contains("{e}"); }
    /// The sliced matrix axis (0 rows, 1 columns) and the first index, or
    /// {-1, 0} for the whole tensor.
    std::pair<int64_t, int64_t> sliceOf() {
      if (auto s = getSlice())
        return {(*s)[0], (*s)[1]};
      return {-1, 0};
    }
  }];
}

def Kiln_DequantizeOp : Kiln_Op<"dequantize", [Pure]> {
  let summary = "block-scaled dequantization";
  let description = [{
    `result[..., i, j] = values[..., i, j] * scales[..., i / B0, j / B1]`
    with `block = [B0, B1]` over the last two dimensions. Two forms:

    * MXFP4: `f4E2M1FN` values, `f8E8M0FNU` scales, block `[1, 32]`.
    * FP8 (official GLM FP8): `f8E4M3FN` values, `f32` scales (multipliers,
      despite the checkpoint name `weight_scale_inv`), block `[128, 128]`.

    Leading dimensions (e.g. the expert stack) must match.

    ```mlir
    %w = kiln.dequantize %q, %s block [1, 32]
           : tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<128x256xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$values, Kiln_Tensor:$scales,
                       DenseI64ArrayAttr:$block);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $values `,` $scales `block` $block attr-dict `:` type($values) `,`
    type($scales) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_BlockScaledOp : Kiln_Op<"block_scaled", [Pure,
    TypesMatchWith<"values have the type the result names", "result",
                   "values",
                   "::llvm::cast<::kiln::BlockScaledType>($_self).getValues()">,
    TypesMatchWith<"scales have the type the result names", "result",
                   "scales",
                   "::llvm::cast<::kiln::BlockScaledType>($_self).getScales()">]> {
  let summary = "pairs block-scaled values with their scales";
  let description = [{
    Makes one `!kiln.block_scaled` value of `values` and `scales`, whose
    types and block shape the result type names (its rules are checked
    there). Nothing is computed: the op that reads the value (`kiln.moe`)
    dequantizes inside its own kernels. Produced by
    `kiln-fuse-mx-dequant-gemm` from a `kiln.dequantize`.

    ```mlir
    %g = kiln.block_scaled %q, %s
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$values, Kiln_Tensor:$scales);
  let results = (outs Kiln_BlockScaledType:$result);
  let assemblyFormat = [{
    $values `,` $scales attr-dict `:` qualified(type($result))
  }];
}

//===----------------------------------------------------------------------===//
// Dense math
//===----------------------------------------------------------------------===//

def Kiln_EmbeddingOp : Kiln_Op<"embedding", [Pure]> {
  let summary = "embedding lookup";
  let description = [{
    `result[t] = table[ids[t]]`; out-of-range ids are a runtime error.

    ```mlir
    %h = kiln.embedding %table[%ids] : tensor<2048x256xbf16>, tensor<?xi32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$table, Kiln_IntTensor:$ids);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $table `[` $ids `]` attr-dict `:` type($table) `,` type($ids) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_MatmulOp : Kiln_Op<"matmul", [Pure]> {
  let summary = "linear layer: x times the transposed weight";
  let description = [{
    `result[t, n] = sum_k lhs[t, k] * rhs[n, k]`, accumulated in FP32 and
    rounded to the result element type. `rhs` is a weight in the Hugging Face
    `[out, in]` layout. The router's gate runs with an `f32` result.

    ```mlir
    %y = kiln.matmul %x, %w : tensor<?x256xf32>, tensor<128x256xbf16> -> tensor<?x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_MxMatmulOp : Kiln_Op<"mx_matmul", [Pure]> {
  let summary = "fused block-scaled dequantize + matmul";
  let description = [{
    `result = lhs * dequantize(values, scales, block)^T` without materializing
    the dequantized weight. Produced by `kiln-fuse-mx-dequant-gemm` from a
    `kiln.dequantize` feeding a `kiln.matmul`; the operand rules are those of
    the two ops it replaces.

    ```mlir
    %y = kiln.mx_matmul %x, %q, %s block [1, 32]
           : tensor<?x256xf32>, tensor<128x256xf4E2M1FN>, tensor<128x8xf8E8M0FNU> -> tensor<?x128xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_Tensor:$values,
                       Kiln_Tensor:$scales, DenseI64ArrayAttr:$block);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $values `,` $scales `block` $block attr-dict `:` type($lhs) `,`
    type($values) `,` type($scales) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_RmsNormOp : Kiln_Op<"rms_norm", [Pure]> {
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `y = x * rsqrt(mean(x^2) + epsilon) * weight`, in FP32. `x` may have any
    rank >= 1 (per-head norms use `[T, heads, D]`); `weight` is `[D]`.

    ```mlir
    %y = kiln.rms_norm %x, %w eps 1.0e-05 : tensor<?x256xf32>, tensor<256xbf16> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `eps` $epsilon attr-dict `:` type($input) `,`
    type($weight) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_LayerNormOp : Kiln_Op<"layer_norm", [Pure]> {
  let summary = "layer normalization with weight and bias over the last dimension";
  let description = [{
    `y = (x - mean(x)) * rsqrt(var(x) + epsilon) * weight + bias`, in FP32.
    Used by the DSA indexer's key norm (eps 1e-6).

    ```mlir
    %y = kiln.layer_norm %x, %w, %b eps 1.0e-06
           : tensor<?x32xf32>, tensor<32xbf16>, tensor<32xbf16> -> tensor<?x32xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$weight,
                       Kiln_FloatTensor:$bias, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias `eps` $epsilon attr-dict `:` type($input) `,`
    type($weight) `,` type($bias) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_RopeOp : Kiln_Op<"rope", [Pure]> {
  let summary = "rotary position embedding on a slice of the last dimension";
  let description = [{
    Rotates dims `[offset, offset + rotary_dim)` of every head of `input`
    (`[T, D]` or `[T, heads, D]`) by angle `positions[t] * theta^(-2i/rotary_dim)`
    for pair i; other dims pass through. `style` picks the pairing.
    GLM-5 MLA: interleaved on the last 64 dims; GLM-5 indexer: interleaved
    on the first 64; GLM-4.x: NeoX on dims 0..63 of 128.

    ```mlir
    %y = kiln.rope %x, %pos interleaved theta 1.0e+04 dims [32, 16]
           : tensor<?x8x48xf32>, tensor<?xi32> -> tensor<?x8x48xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IntTensor:$positions,
                       Kiln_RopeStyleAttr:$style, F32Attr:$theta,
                       I64Attr:$offset, I64Attr:$rotary_dim);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $positions $style `theta` $theta `dims` `[` $offset `,`
    $rotary_dim `]` attr-dict `:` type($input) `,` type($positions) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def Kiln_SigmoidOp : Kiln_UnaryOp<"sigmoid", "logistic sigmoid", "1 / (1 + exp(-x))">;
def Kiln_SiluOp : Kiln_UnaryOp<"silu", "SiLU (swish)", "x / (1 + exp(-x))">;
def Kiln_ReluOp : Kiln_UnaryOp<"relu", "rectified linear unit", "max(x, 0)">;

class Kiln_BinaryOp<string mnemonic, string summaryText, string math>
    : Kiln_Op<mnemonic, [Pure]> {
  let summary = summaryText;
  let description = "Elementwise `" # math # "` in FP32. `rhs` has the "
    # "shape of `lhs`, or is 1-D and broadcasts along the last dimension "
    # "(a bias).\n\n```mlir\n%z = kiln." # mnemonic
    # " %x, %y : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>\n```";
  let arguments = (ins Kiln_FloatTensor:$lhs, Kiln_FloatTensor:$rhs);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_AddOp : Kiln_BinaryOp<"add", "elementwise addition", "lhs + rhs">;
def Kiln_MulOp : Kiln_BinaryOp<"mul", "elementwise multiplication", "lhs * rhs">;

def Kiln_ScaleOp : Kiln_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "multiply by a constant";
  let description = [{
    `y = x * factor`, e.g. the MoE `routed_scaling_factor`. Folds away when
    `factor` is 1.

    ```mlir
    %y = kiln.scale %x by 2.5 : tensor<?x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$factor);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `by` $factor attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Kiln_CastOp : Kiln_Op<"cast", [Pure]> {
  let summary = "element type conversion";
  let description = [{
    Converts between float element types (round to nearest even). Same shape.
    A cast to the same type folds away.

    ```mlir
    %y = kiln.cast %x : tensor<?x64xf32> -> tensor<?x64xbf16>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Selection and reductions (router pieces)
//===----------------------------------------------------------------------===//

def Kiln_TopKOp : Kiln_Op<"top_k", [Pure]> {
  let summary = "k largest entries of the last dimension";
  let description = [{
    Returns the `k` largest values and their `i32` indices along the last
    dimension, ties broken towards the lower index. Order of the k results is
    descending by value.

    ```mlir
    %v, %i = kiln.top_k %s k 4 : tensor<?x16xf32> -> tensor<?x4xf32>, tensor<?x4xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$k);
  let results = (outs Kiln_FloatTensor:$values, Kiln_IntTensor:$indices);
  let assemblyFormat = [{
    $input `k` $k attr-dict `:` type($input) `->` type($values) `,` type($indices)
  }];
  let hasVerifier = 1;
}

def Kiln_GroupLimitOp : Kiln_Op<"group_limit", [Pure, SameOperandsAndResultType]> {
  let summary = "keep the best expert groups, mask the others";
  let description = [{
    Splits the last dimension into `n_group` groups, ranks groups by the sum
    of their two largest entries, keeps the best `topk_group` and sets every
    entry of the other groups to -inf (the GLM-5 `noaux_tc` group filter).
    A no-op when `n_group == topk_group`.

    ```mlir
    %m = kiln.group_limit %s groups 4 keep 2 : tensor<?x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, I64Attr:$n_group,
                       I64Attr:$topk_group);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `groups` $n_group `keep` $topk_group attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_GatherOp : Kiln_Op<"gather", [Pure]> {
  let summary = "take entries along the last dimension by index";
  let description = [{
    `result[t, j] = input[t, indices[t, j]]`.

    ```mlir
    %w = kiln.gather %s[%i] : tensor<?x16xf32>, tensor<?x4xi32> -> tensor<?x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IntTensor:$indices);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `[` $indices `]` attr-dict `:` type($input) `,` type($indices) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_NormalizeOp : Kiln_Op<"normalize", [Pure, SameOperandsAndResultType]> {
  let summary = "divide by the sum of the last dimension";
  let description = [{
    `y = x / (sum(x, -1) + epsilon)`: the router's `norm_topk_prob` step.

    ```mlir
    %n = kiln.normalize %w eps 1.0e-20 : tensor<?x4xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, F32Attr:$epsilon);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input `eps` $epsilon attr-dict `:` type($result)";
}

def Kiln_SoftmaxOp : Kiln_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "softmax over the last dimension";
  let description = [{
    FP32, max-subtracted.

    ```mlir
    %p = kiln.softmax %x : tensor<?x16xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Kiln_ArgmaxOp : Kiln_Op<"argmax", [Pure]> {
  let summary = "index of the largest entry of the last dimension";
  let description = [{
    Greedy token choice; ties go to the lower index.

    ```mlir
    %t = kiln.argmax %logits : tensor<?x2048xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input);
  let results = (outs Kiln_IntTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_SampleOp : Kiln_Op<"sample", []> {
  let summary = "hand logits to the runtime's sampler";
  let description = [{
    Marks where logits leave the program: the runtime applies the request's
    sampling parameters (temperature, top-k, top-p, seed) and returns one
    token per row. Not pure: every call draws from the sampler's state.

    ```mlir
    %t = kiln.sample %logits : tensor<?x2048xf32> -> tensor<?xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$logits);
  let results = (outs Kiln_IntTensor:$result);
  let assemblyFormat = "$logits attr-dict `:` type($logits) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure]> {
  let summary = "reinterpret the shape, keeping the token dimension";
  let description = [{
    Same elements in row-major order. Static dimensions after the first must
    multiply to the same count; the leading (token) dimension is kept.

    ```mlir
    %y = kiln.reshape %x : tensor<?x384xf32> -> tensor<?x8x48xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TakeRowsOp : Kiln_Op<"take_rows", [Pure]> {
  let summary = "select rows of a token-major tensor";
  let description = [{
    `result[r] = input[rows[r]]`: picks the positions whose logits the
    program computes (the last prompt token, every position for perplexity,
    the k+1 verified positions of a speculative round).

    ```mlir
    %h = kiln.take_rows %x[%rows] : tensor<?x256xf32>, tensor<?xi32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, Kiln_IntTensor:$rows);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $input `[` $rows `]` attr-dict `:` type($input) `,` type($rows) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_ConcatOp : Kiln_Op<"concat", [Pure]> {
  let summary = "concatenate along one dimension";
  let description = [{
    ```mlir
    %y = kiln.concat %a, %b axis 1 : tensor<?x256xf32>, tensor<?x256xf32> -> tensor<?x512xf32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$inputs, I64Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $inputs `axis` $axis attr-dict `:` type($inputs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_SplitOp : Kiln_Op<"split", [Pure]> {
  let summary = "split one dimension into consecutive pieces";
  let description = [{
    The result sizes along `axis` must add up to the input's.

    ```mlir
    %a, %b = kiln.split %x axis 2 : tensor<?x8x48xf32> -> tensor<?x8x32xf32>, tensor<?x8x16xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$input, I64Attr:$axis);
  let results = (outs Variadic<Kiln_Tensor>:$results);
  let assemblyFormat = "$input `axis` $axis attr-dict `:` type($input) `->` type($results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// KV cache
//===----------------------------------------------------------------------===//

def Kiln_KvCacheOp : Kiln_Op<"kv_cache", [Symbol]> {
  let summary = "declares a per-sequence, per-position cache";
  let description = [{
    A paged cache holding `width` values of `element_type` per (sequence,
    position). Kinds: MLA latent `[c_kv | k_pe]` (576 wide on GLM-5), the DSA
    indexer keys (one 128-vector per token of a full layer), GQA keys and
    values. The runtime allocates pages; the plan only names caches.

    ```mlir
    kiln.kv_cache @layer0.latent width 80 : bf16
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, I64Attr:$width,
                       TypeAttr:$element_type);
  let assemblyFormat = "$sym_name `width` $width attr-dict `:` $element_type";
  let hasVerifier = 1;
}

def Kiln_KvCacheAppendOp : Kiln_Op<"kv_cache.append",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "write rows into a cache at (sequence, position)";
  let description = [{
    Row t of `values` (`[T, width]`) goes to sequence `seq_ids[t]`, position
    `positions[t]`. Rows written past a later rollback are discarded by the
    runtime.

    ```mlir
    kiln.kv_cache.append @layer0.latent[%seq, %pos] = %lat : tensor<?xi32>, tensor<?xi32>, tensor<?x80xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$cache, Kiln_IntTensor:$seq_ids,
                       Kiln_IntTensor:$positions, Kiln_FloatTensor:$values);
  let assemblyFormat = [{
    $cache `[` $seq_ids `,` $positions `]` `=` $values attr-dict `:`
    type($seq_ids) `,` type($positions) `,` type($values)
  }];
  let hasVerifier = 1;
}

def Kiln_KvCacheReadOp : Kiln_Op<"kv_cache.read",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "read one sequence's cached rows up to a position";
  let description = [{
    Returns rows `0 .. max(positions)` of sequence `seq_ids[0]` as
    `[S, width]`. All tokens of the chunk must belong to one sequence.
    Attention ops read caches themselves; this op serves single-sequence
    programs and tests.

    ```mlir
    %k = kiln.kv_cache.read @layer0.latent[%seq, %pos] : tensor<?xi32>, tensor<?xi32> -> tensor<?x80xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$cache, Kiln_IntTensor:$seq_ids,
                       Kiln_IntTensor:$positions);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $cache `[` $seq_ids `,` $positions `]` attr-dict `:` type($seq_ids) `,`
    type($positions) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Kiln_GqaAttentionOp : Kiln_Op<"gqa_attention",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "grouped-query causal attention over cached keys and values";
  let description = [{
    `q` is `[T, Hq, D]`. Keys and values come from the caches `k_cache` and
    `v_cache` (`Hk * D` and `Hk * Dv` wide) for each token's sequence,
    positions `0 .. positions[t]` (causal). Query head h uses KV head
    `h / (Hq / Hk)`. Softmax in FP32 with `scale`. Result `[T, Hq, Dv]`.

    ```mlir
    %o = kiln.gqa_attention %q, @l0.k, @l0.v [%seq, %pos] scale 0.125
           : tensor<?x8x64xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x64xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q, FlatSymbolRefAttr:$k_cache,
                       FlatSymbolRefAttr:$v_cache, Kiln_IntTensor:$seq_ids,
                       Kiln_IntTensor:$positions, F32Attr:$scale);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $q `,` $k_cache `,` $v_cache `[` $seq_ids `,` $positions `]` `scale` $scale
    attr-dict `:` type($q) `,` type($seq_ids) `,` type($positions) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_MlaAttentionOp : Kiln_Op<"mla_attention",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>, AttrSizedOperandSegments]> {
  let summary = "multi-head latent attention over the latent cache";
  let description = [{
    GLM-5 MLA. `q_nope` `[T, H, Dn]` and `q_pe` `[T, H, Dr]` (RoPE applied);
    the cache rows are `[c_kv (kv_lora_rank) | k_pe (Dr)]`. `kv_b` is the
    `kv_b_proj` weight `[H * (Dn + Dv), kv_lora_rank]`, per head
    `[k_nope rows (Dn) | v rows (Dv)]`.
    `score = (q_nope . (W_UK c_kv) + q_pe . k_pe) * scale`, `o = sum p * (W_UV c_kv)`.
    Lowerings may use the absorbed form (`q_nope W_UK` against `c_kv`), which
    is the same math. With `kv_b_scales` (and `block`), `kv_b` holds
    block-scaled values (MXFP4 or FP8) decoded inside the kernel. When
    `top_k` (`[T, K]` i32, -1 = unused slot) is
    given, only those key positions are attended (the DSA selection), else
    all causal positions. Result `[T, H, Dv]`.

    ```mlir
    %o = kiln.mla_attention %qn, %qp, %kvb, @l0.latent [%seq, %pos] scale 0.144
           : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x32xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q_nope, Kiln_FloatTensor:$q_pe,
                       Kiln_Tensor:$kv_b, Optional<Kiln_Tensor>:$kv_b_scales,
                       FlatSymbolRefAttr:$cache,
                       Kiln_IntTensor:$seq_ids, Kiln_IntTensor:$positions,
                       Optional<Kiln_IntTensor>:$top_k, F32Attr:$scale,
                       OptionalAttr<DenseI64ArrayAttr>:$block);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $q_nope `,` $q_pe `,` $kv_b (`scales` $kv_b_scales^ `block` $block)? `,`
    $cache `[` $seq_ids `,` $positions `]` (`top_k` $top_k^)? `scale` $scale
    attr-dict `:` type($q_nope) `,` type($q_pe) `,` type($kv_b)
    (`scales` type($kv_b_scales)^)? `,` type($seq_ids) `,` type($positions)
    (`,` type($top_k)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_IndexerTopKOp : Kiln_Op<"indexer_top_k",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "DSA lightning-indexer scores and their top-k";
  let description = [{
    `q` `[T, Hi, Di]` and `weights` `[T, Hi]` against the indexer key cache
    (`Di` wide): `I[t, s] = sum_h weights[t, h] * relu(scale * q[t, h] . k[s])`
    over causal keys s <= positions[t] of the token's sequence, then the
    `k` best keys (ties to the lower position). Fewer than `k` keys: the
    rest are -1. Result `[T, k]` i32 positions.

    ```mlir
    %sel = kiln.indexer_top_k %q, %w, @l0.index [%seq, %pos] k 64 scale 0.177
             : tensor<?x4x32xf32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x64xi32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$q, Kiln_FloatTensor:$weights,
                       FlatSymbolRefAttr:$cache, Kiln_IntTensor:$seq_ids,
                       Kiln_IntTensor:$positions, I64Attr:$k, F32Attr:$scale);
  let results = (outs Kiln_IntTensor:$result);
  let assemblyFormat = [{
    $q `,` $weights `,` $cache `[` $seq_ids `,` $positions `]` `k` $k `scale`
    $scale attr-dict `:` type($q) `,` type($weights) `,` type($seq_ids) `,`
    type($positions) `->` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

def Kiln_ExpertsOp : Kiln_Op<"experts", [Pure]> {
  let summary = "unfused expert dispatch, SwiGLU experts and weighted combine";
  let description = [{
    `result[t] = sum_j weights[t, j] * down_e(silu(gate_e x_t) * up_e x_t)`
    with `e = indices[t, j]`. Expert weights are stacked: `gate`, `up`
    `[E, I, H]`, `down` `[E, H, I]`. This is the graph-level form that
    `kiln-fuse-moe-routing` folds into `kiln.moe`.

    ```mlir
    %y = kiln.experts %x, %idx, %w, %g, %u, %d
           : tensor<?x256xf32>, tensor<?x4xi32>, tensor<?x4xf32>, tensor<16x128x256xbf16>,
             tensor<16x128x256xbf16>, tensor<16x256x128xbf16> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_IntTensor:$indices,
                       Kiln_FloatTensor:$weights, Kiln_FloatTensor:$gate,
                       Kiln_FloatTensor:$up, Kiln_FloatTensor:$down);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $indices `,` $weights `,` $gate `,` $up `,` $down attr-dict `:`
    type($input) `,` type($indices) `,` type($weights) `,` type($gate) `,`
    type($up) `,` type($down) `->` type($result)
  }];
  let hasVerifier = 1;
}

// A kiln.moe expert weight: a float tensor, or block-scaled values.
def Kiln_ExpertWeight : AnyTypeOf<[Kiln_FloatTensor, Kiln_BlockScaledType],
                                  "float tensor or block-scaled tensor">;

def Kiln_MoeOp : Kiln_Op<"moe", [Pure]> {
  let summary = "fused mixture of experts: route, group, expert GEMMs, combine";
  let description = [{
    One op for a whole GLM MoE block:

    1. route: `s = sigmoid(x * router^T)` in FP32; selection on
       `s + router_bias` after the `n_group`/`topk_group` filter; `top_k`
       experts; weights are the unbiased `s`, divided by their sum (+1e-20)
       when `norm_topk_prob`, times `routed_scaling_factor`;
    2. group the (token, expert) pairs by expert, each group padded to
       `block_size` rows, so each expert's weights are read once per block;
    3. grouped SwiGLU expert GEMMs (gate/up `[E, I, H]`, down `[E, H, I]`);
    4. weighted combine, plus the shared expert (`shared` gate, up, down:
       `[Is, H]`, `[Is, H]`, `[H, Is]`) when present.

    Each expert weight is a float tensor, or a `!kiln.block_scaled` value
    (MXFP4 or FP8, made by `kiln.block_scaled`) dequantized inside the
    GEMM. The three routed stacks are all float or all block-scaled with
    one block shape; so are the three shared matrices, whose format may
    differ from the routed ones (a BF16 shared expert beside MXFP4 experts).

    With `local_experts_from F` the stacks hold only experts F .. F+El-1 of
    the router's E (one rank's share under expert parallelism): the router
    still chooses among all E, and pairs routed elsewhere add nothing here
    (the ranks' results are summed by a `kiln.all_reduce`).

    With `shared_own_rows` the input is a `kiln.dispatch_rows` result and
    the shared expert runs only on its first rows, the call's own tokens:
    every token's shared expert runs once, on the rank that owns the token.

    ```mlir
    %g = kiln.block_scaled %gq, %gs
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    %u = kiln.block_scaled %uq, %us
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    %d = kiln.block_scaled %dq, %ds
           : !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>
    %y = kiln.moe %x router %rw bias %rb experts %g, %u, %d shared %sg, %su, %sd
           top_k 4 groups 1 keep 1 scale 2.5 norm block_size 16
           : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>,
              !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>,
              !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>,
              !kiln.block_scaled<tensor<16x256x128xf4E2M1FN>, tensor<16x256x4xf8E8M0FNU>, [1, 32]>,
              tensor<128x256xbf16>, tensor<128x256xbf16>, tensor<256x128xbf16>) -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins
    Kiln_FloatTensor:$input, Kiln_FloatTensor:$router,
    Kiln_FloatTensor:$router_bias,
    Kiln_ExpertWeight:$gate, Kiln_ExpertWeight:$up, Kiln_ExpertWeight:$down,
    Variadic<Kiln_ExpertWeight>:$shared,
    I64Attr:$top_k, I64Attr:$n_group, I64Attr:$topk_group,
    F32Attr:$routed_scaling_factor, UnitAttr:$norm_topk_prob,
    I64Attr:$block_size,
    OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$expert_offset,
    UnitAttr:$shared_own_rows);
  let results = (outs Kiln_FloatTensor:$result);
  let assemblyFormat = [{
    $input `router` $router `bias` $router_bias `experts` $gate `,` $up `,` $down
    (`shared` $shared^)?
    `top_k` $top_k `groups` $n_group `keep` $topk_group
    `scale` $routed_scaling_factor (`norm` $norm_topk_prob^)?
    `block_size` $block_size (`local_experts_from` $expert_offset^)?
    (`shared_own_rows` $shared_own_rows^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The shared expert's matrices, or null without one.
    ::mlir::Value getSharedGate() { return sharedMatrix(0); }
    ::mlir::Value getSharedUp() { return sharedMatrix(1); }
    ::mlir::Value getSharedDown() { return sharedMatrix(2); }
    /// Matrix `i` (0 gate, 1 up, 2 down) of the shared expert, or null.
    ::mlir::Value sharedMatrix(unsigned i) {
      return getShared().size() == 3 ? getShared()[i] : ::mlir::Value();
    }
  }];
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

def Kiln_AllReduceOp : Kiln_Op<"all_reduce", [SameOperandsAndResultType]> {
  let summary = "sum over every rank of a tensor-parallel group";
  let description = [{
    Each rank holds a partial `input` (e.g. the output of its share of a
    row-split projection); every rank gets the sum over its group, added in
    rank order so the result does not depend on timing. `group G` splits
    the ranks into groups of G consecutive ranks (ranks 0..G-1, G..2G-1,
    ...: the tensor-parallel groups when expert parallelism runs beside
    tensor parallelism); `group 0`, the default, is every rank. On one rank
    it is the identity. Not `Pure`: every rank must run it, in the same
    order, so it is never removed or reordered.

    ```mlir
    %y = kiln.all_reduce %x : tensor<?x256xf32>
    %z = kiln.all_reduce %x group 2 : tensor<?x256xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input,
      DefaultValuedAttr<ConfinedAttr<I64Attr, [IntNonNegative]>, "0">:$group);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$input (`group` $group^)? attr-dict `:` type($result)";
}

def Kiln_AllGatherRowsOp : Kiln_Op<"all_gather_rows",
    [SameOperandsAndResultElementType]> {
  let summary = "the rows of every data-parallel rank, in rank order";
  let description = [{
    Data-parallel attention (`kiln-compile --dp-attention`): each rank holds
    the rows of its own tokens; the result is every rank's rows, rank 0's
    first, so a `kiln.moe` whose experts are split over the ranks can run
    every token. The leading dimension of the result is dynamic (the sum of
    the ranks' token counts, which only the run knows); the other
    dimensions are the input's. On one rank it is the identity. Not `Pure`:
    every rank runs it, in the same order.

    `group G` (default 1): the ranks form data-parallel groups of G
    consecutive ranks that hold the same rows (tensor parallelism inside a
    group, `--tp G`); each group's rows appear once, in group order.

    ```mlir
    %all = kiln.all_gather_rows %x : tensor<?x256xf32> -> tensor<?x256xf32>
    %all2 = kiln.all_gather_rows %x group 4 : tensor<?x256xf32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input,
      DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$group);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$input (`group` $group^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_ReduceScatterRowsOp : Kiln_Op<"reduce_scatter_rows",
    [SameOperandsAndResultElementType]> {
  let summary = "this rank's rows of the sum over every rank";
  let description = [{
    The way back from `kiln.all_gather_rows`: each rank holds a partial
    result for the rows of every rank (its experts' share of each token);
    every rank gets the sum over all ranks, added in rank order so the
    result does not depend on timing, of its own rows only. The leading
    dimension of the result is dynamic; the other dimensions are the
    input's. On one rank it is the identity. Not `Pure`.

    `group G` as for `kiln.all_gather_rows`: every rank of a group gets its
    group's rows.

    ```mlir
    %mine = kiln.reduce_scatter_rows %p : tensor<?x256xf32> -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input,
      DefaultValuedAttr<ConfinedAttr<I64Attr, [IntPositive]>, "1">:$group);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat =
      "$input (`group` $group^)? attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_DispatchRowsOp : Kiln_Op<"dispatch_rows", []> {
  let summary = "send each row to the ranks that hold its experts";
  let description = [{
    Expert parallelism with data-parallel attention, exchanged all-to-all
    (`kiln-compile --ep N --dp-attention --moe-exchange all-to-all`): each
    rank routes its own rows as `kiln.moe` does (`router`, `router_bias`,
    `top_k`, `groups`, `keep`: support/abi/MoeRules.h) and sends each row
    to every rank that holds one of its `top_k` experts (rank r holds
    experts r * `experts_per_rank`, ...). `rows` is what this rank
    received: its own rows first, then each peer's in rank order, each
    peer's in token order; with `own_rows` all of this rank's own rows
    come first whatever their experts (the rank runs their shared expert),
    otherwise only those routed here. `routes` has one row per input row:
    the ranks it was sent to, a bit per rank (32 ranks to an i32 word).
    Its leading dimension is dynamic (only the run knows how many rows
    arrive). On one rank `rows` is the input. Not `Pure`: every rank runs
    it, in the same order.

    ```mlir
    %rows, %routes = kiln.dispatch_rows %x router %rw bias %rb top_k 4
        groups 1 keep 1 experts_per_rank 8 own_rows
        : (tensor<?x256xf32>, tensor<16x256xbf16>, tensor<16xf32>)
          -> (tensor<?x256xf32>, tensor<?x1xi32>)
    ```
  }];
  let arguments = (ins Kiln_FloatTensor:$input, Kiln_FloatTensor:$router,
      Kiln_FloatTensor:$router_bias,
      ConfinedAttr<I64Attr, [IntPositive]>:$top_k,
      ConfinedAttr<I64Attr, [IntPositive]>:$n_group,
      ConfinedAttr<I64Attr, [IntPositive]>:$topk_group,
      ConfinedAttr<I64Attr, [IntPositive]>:$experts_per_rank,
      UnitAttr:$own_rows);
  let results = (outs RankedTensorOf<[F32]>:$rows,
      RankedTensorOf<[I32]>:$routes);
  let assemblyFormat = [{
    $input `router` $router `bias` $router_bias `top_k` $top_k
    `groups` $n_group `keep` $topk_group `experts_per_rank` $experts_per_rank
    (`own_rows` $own_rows^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Kiln_CombineRowsOp : Kiln_Op<"combine_rows", []> {
  let summary = "the way back from kiln.dispatch_rows, summed in rank order";
  let description = [{
    `input` holds one row per row this rank received in the
    `kiln.dispatch_rows` that made `routes` (its experts' part of that
    token). Each row goes back to the rank it came from; the result has
    one row per row of that dispatch's input: the sum of its parts over the
    ranks it was sent to, added in rank order so the result does not depend
    on timing. On one rank it is the input. Not `Pure`.

    ```mlir
    %y = kiln.combine_rows %p routes %routes
        : (tensor<?x256xf32>, tensor<?x1xi32>) -> tensor<?x256xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input,
      RankedTensorOf<[I32]>:$routes);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `routes` $routes attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // KILN_OPS_TD
