//===- Passes.td - Kiln's passes ---------------------------*- tablegen -*-===//

#ifndef KILN_PASSES_TD
#define KILN_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnQuantizeMxfp4Pass : Pass<"kiln-quantize-mxfp4", "mlir::ModuleOp"> {
  let summary = "Quantize float (and FP8) weights to MXFP4 by weight group";
  let description = [{
    Rewrites each selected float weight `W` into two `kiln.weight` ops naming
    the same checkpoint tensor, one with `mxfp4_values` and one with
    `mxfp4_scales` encoding, and a `kiln.dequantize` back to the original
    type. The compiler quantizes the bytes while streaming them into the
    artifact (OCP MX v1.0: E2M1 elements, one E8M0 scale per 32 along K, low
    nibble first); `kiln-fuse-mx-dequant-gemm` then folds the dequantize into
    the GEMM. FP8 weights (with their 128x128 block scales) are re-quantized
    through exact dequantization. Weights that are already MXFP4 (a Quark
    checkpoint) are left alone.

    Groups (`policy`, comma separated): `experts` (routed experts, the
    default), `shared` (shared experts), `dense` (dense MLPs),
    `attention` (attention and indexer projections), `mtp` (everything in
    the MTP layer, which is otherwise left as is, and the head as the draft
    plan reads it: GLM-5.x's MTP layer has none of its own, so the draft
    gets its own quantized copy of `lm_head`), `lm_head` (the model's head),
    or `all`.
    A weight qualifies only when it feeds a GEMM and its last dimension is a
    multiple of 32.

    Before:
    ```mlir
    %w = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" : tensor<16x128x256xbf16>
    ```
    After:
    ```mlir
    %v = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_values, even> : tensor<16x128x256xf4E2M1FN>
    %s = kiln.weight "model.layers.1.mlp.experts.{e}.up_proj.weight" encoding <mxfp4_scales, even> : tensor<16x128x8xf8E8M0FNU>
    %w = kiln.dequantize %v, %s block [1, 32] : ... -> tensor<16x128x256xbf16>
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", "\"experts\"",
           "Weight groups to quantize: experts, shared, dense, attention, "
           "mtp, lm_head, all (comma separated)">,
    Option<"rule", "rule", "std::string", "\"even\"",
           "Block-scale rule: even (Quark's default) or floor (OCP)">,
  ];
}

def KilnFuseMoeRoutingPass : Pass<"kiln-fuse-moe-routing", "mlir::ModuleOp"> {
  let summary = "Fuse the noaux_tc router, expert dispatch and combine into kiln.moe";
  let description = [{
    Recognizes the router subgraph the GLM frontend emits — FP32 gate
    matmul, sigmoid, correction bias added for selection only, optional
    group limit, top-k, gather of the unbiased scores, normalization,
    routed scaling — together with `kiln.experts` and, when present, the
    shared expert (`down(silu(gate x) * up x)`) added to the result, and
    replaces it with one `kiln.moe`.

    The subgraph must compute exactly the router the module's `kiln.router`
    attribute declares (`top_k`, `n_group`, `topk_group`, `norm_topk_prob`,
    `routed_scaling_factor`, written by the frontend from config.json). Near
    misses are left unfused: a softmax router, a bias that also reaches the
    weights, a missing or extra normalization, a different scale, a
    different top-k.

    Before (abridged):
    ```mlir
    %l = kiln.matmul %x, %router : ... -> tensor<?x16xf32>
    %s = kiln.sigmoid %l
    %b = kiln.add %s, %bias
    %v, %i = kiln.top_k %b k 4
    %w = kiln.gather %s[%i]
    %n = kiln.normalize %w eps 1.0e-20
    %f = kiln.scale %n by 2.5
    %y = kiln.experts %x, %i, %f, %gate, %up, %down
    ```
    After:
    ```mlir
    %y = kiln.moe %x router %router bias %bias experts %gate, %up, %down
           top_k 4 groups 1 keep 1 scale 2.5 norm block_size 16 : ...
    ```
  }];
  let options = [
    Option<"blockSize", "block-size", "int64_t", "16",
           "Rows per expert block in the token grouping">,
  ];
}

def KilnFuseMxDequantGemmPass
    : Pass<"kiln-fuse-mx-dequant-gemm", "mlir::ModuleOp"> {
  let summary = "Fold block-scaled dequantization into the GEMMs that consume it";
  let description = [{
    `kiln.matmul %x, (kiln.dequantize %v, %s)` becomes
    `kiln.mx_matmul %x, %v, %s`, and each dequantized expert weight of a
    `kiln.moe` (routed and shared, the three of a group dequantized with
    one block shape) becomes a `kiln.block_scaled %v, %s` value, so no
    target ever materializes dequantized weights. Applies to MXFP4 (block
    [1, 32]) and FP8 (block [128, 128]).

    ```mlir
    %g = kiln.block_scaled %gq, %gs
           : !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    %y = kiln.moe %x router %r bias %b experts %g, %u, %d ... : (...) -> tensor<?x256xf32>
    ```
  }];
}

def KilnCheckFusedPass : Pass<"kiln-check-fused", "mlir::ModuleOp"> {
  let summary = "Reject unfused MoE (kiln.experts) and leftover kiln.dequantize";
  let description = [{
    Fails with one error per `kiln.experts` (an MoE whose router
    `kiln-fuse-moe-routing` refused to fuse) and one per `kiln.dequantize`
    left in the program (its result does not feed a GEMM that
    `kiln-fuse-mx-dequant-gemm` could fuse). The router ops of a refused
    fusion are not reported on their own: the `kiln.experts` they feed is.
    No other op is checked. Run at the end of the compile pipeline so these
    missed fusions are compile-time errors, not a slow or wrong model.
  }];
}

def KilnPartitionExpertsPass
    : Pass<"kiln-partition-experts", "mlir::ModuleOp"> {
  let summary = "Split the routed experts of every kiln.moe over expert-parallel ranks";
  let description = [{
    Expert parallelism over `ranks` ranks, as rank `rank` runs it: every
    `kiln.moe` keeps its router (it still chooses among all E experts) but
    its expert stacks shrink to this rank's E / ranks experts, starting at
    expert `rank * E / ranks` (`local_experts_from` on the op,
    `experts_from` on the `kiln.weight`s, so the artifact of a rank holds
    only its experts' bytes). The shared expert stays on rank 0 only. A
    `kiln.all_reduce` after each `kiln.moe` adds the ranks' partial results
    in rank order; attention, the dense layers, the embedding and the head
    are replicated. The tokens are replicated too (every rank runs every
    token), so no all-to-all is needed. The expert count must be a multiple
    of `ranks`. With `ranks=1` the module is left as it is.

    Before, E = 16:
    ```mlir
    %g = kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" : tensor<16x128x256xbf16>
    %y = kiln.moe %x router %r bias %b experts %g, %u, %d shared %sg, %su, %sd ... -> tensor<?x256xf32>
    ```
    After, `ranks=2 rank=1`:
    ```mlir
    %g = kiln.weight "model.layers.1.mlp.experts.{e}.gate_proj.weight" experts_from 8 : tensor<8x128x256xbf16>
    %p = kiln.moe %x router %r bias %b experts %g, %u, %d ... local_experts_from 8 : ... -> tensor<?x256xf32>
    %y = kiln.all_reduce %p : tensor<?x256xf32>
    ```

    With `dp-attention` (`kiln-compile --ep N --dp-attention`) the ranks
    run different tokens: attention, the dense layers, the embedding and
    the head run each rank's own requests, so each `kiln.moe` first gathers
    every rank's rows and afterwards keeps only its own rows of the sum:
    ```mlir
    %a = kiln.all_gather_rows %x : tensor<?x256xf32> -> tensor<?x256xf32>
    %p = kiln.moe %a router %r bias %b experts %g, %u, %d ... local_experts_from 8 : ... -> tensor<?x256xf32>
    %y = kiln.reduce_scatter_rows %p : tensor<?x256xf32> -> tensor<?x256xf32>
    ```
    With `exchange=all-to-all` each rank sends a row only to the ranks that
    hold one of its experts, and runs the shared expert of its own rows:
    ```mlir
    %a, %routes = kiln.dispatch_rows %x router %r bias %b ... experts_per_rank 8 own_rows : ...
    %p = kiln.moe %a router %r bias %b experts %g, %u, %d shared %sg, %su, %sd ... local_experts_from 8 shared_own_rows : ...
    %y = kiln.combine_rows %p routes %routes : ...
    ```
    With `dp-group G` (`--tp G` beside it) the ranks of a tensor-parallel
    group share their requests: the exchanges take `group G`, and `ranks`
    and `rank` count expert shares (groups), as without it.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "1", "Expert-parallel ranks">,
    Option<"rank", "rank", "int64_t", "0", "This rank, 0 .. ranks-1">,
    Option<"dpAttention", "dp-attention", "bool", "false",
           "Each rank runs its own tokens outside the MoE (data-parallel "
           "attention): gather every rank's rows before each kiln.moe, keep "
           "this rank's rows of the sum after it">,
    Option<"dpGroup", "dp-group", "int64_t", "1",
           "With dp-attention: ranks per data-parallel group (the "
           "tensor-parallel ranks that share a group's requests)">,
    Option<"exchange", "exchange", "std::string", "\"gather\"",
           "With dp-attention, how rows reach the experts: gather (every "
           "rank's rows to every rank, kiln.all_gather_rows and "
           "kiln.reduce_scatter_rows) or all-to-all (each row to the ranks "
           "that hold its experts, kiln.dispatch_rows and "
           "kiln.combine_rows; dp-group 1 only)">,
  ];
}

def KilnPartitionTensorPass
    : Pass<"kiln-partition-tensor", "mlir::ModuleOp"> {
  let summary = "Split attention heads and MLP/expert columns over tensor-parallel ranks";
  let description = [{
    Tensor parallelism over `ranks` ranks, as rank `rank` runs it
    (`kiln-compile --tp N`). Every rank runs every token; what is split:

    - **MLA attention** (`kiln.mla_attention`): heads `[rank * H / ranks,
      (rank + 1) * H / ranks)`. The rows of `q_b_proj` and `kv_b_proj` of
      those heads and the matching columns of `o_proj` are kept (`slice` on
      the `kiln.weight`s); the types of the q chain (projection, reshape,
      split, rope) shrink to the local heads. The latent cache, `q_a`,
      `kv_a` and the DSA indexer are replicated: MLA has one latent head,
      so every rank keeps the whole cache.
    - **Dense SwiGLU MLPs** (`down(silu(gate x) * up x)`): intermediate
      columns `[rank * I / ranks, ...)`: rows of gate and up, columns of
      down.
    - **MoE** (`kiln.moe`): every expert's intermediate columns the same
      way, routed and shared; the router is replicated.

    Each split part ends in a partial sum, followed by `kiln.all_reduce
    group ranks`, the sum over the tensor-parallel group (ranks
    `r - r % ranks ...`). A `kiln.moe` already followed by a
    `kiln.all_reduce` (from `kiln-partition-experts`, which must run first
    when both do) needs none: that sum over every rank adds these parts
    too. The embedding, the head, norms and the MTP layer's `eh_proj` are
    replicated. **GQA attention** (`kiln.gqa_attention`, GLM-4.x) splits
    query and KV heads alike: q, k and v projection rows and their biases,
    every value on the way (bias add, reshape, per-head norm, rope), and
    the K and V caches' widths (so its KV cache per rank is 1/ranks).
    Head, column and expert counts must divide evenly. A block-scaled
    weight (MXFP4, FP8) whose share cuts its blocks is stored dequantized to
    f32 for its reader (a projection, MLA's `kv_b`, a MoE's experts), with a
    warning: the same values the kernels form from the quantized bytes, at
    4 bytes each. With `ranks=1` the module is left as it is.

    Before, 8 heads:
    ```mlir
    %qb = kiln.weight "model.layers.0.self_attn.q_b_proj.weight" : tensor<384x128xbf16>
    %q = kiln.matmul %x, %qb : tensor<?x128xf32>, tensor<384x128xbf16> -> tensor<?x384xf32>
    ```
    After, `ranks=2 rank=1`:
    ```mlir
    %qb = kiln.weight "model.layers.0.self_attn.q_b_proj.weight" slice [0, 192] : tensor<192x128xbf16>
    %q = kiln.matmul %x, %qb : tensor<?x128xf32>, tensor<192x128xbf16> -> tensor<?x192xf32>
    ...
    %p = kiln.matmul %a, %ob : tensor<?x128xf32>, tensor<256x128xbf16> -> tensor<?x256xf32>
    %o = kiln.all_reduce %p group 2 : tensor<?x256xf32>
    ```
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", "1", "Tensor-parallel ranks">,
    Option<"rank", "rank", "int64_t", "0", "This rank, 0 .. ranks-1">,
  ];
}

def KilnBuildPlanPass : Pass<"kiln-build-plan", "mlir::ModuleOp"> {
  let summary = "Lower the fused entry functions to kiln_plan plans";
  let description = [{
    Each entry function (`@prefill`, `@decode` and, when present, `@draft`)
    becomes a `kiln_plan.plan` of kernel dispatches in program order, with
    one `kiln_plan.buffer` per value (its inputs first; a `kiln.reshape`
    shares its input's buffer). Each dispatch is checked against its
    kernel's declaration (support/abi/Kernels.td) as it is made, and an op
    that breaks it, or that no kernel lowers, is an error at that op. The
    `kiln.weight`s the plans read become `kiln_plan.weight` ops (one per
    distinct tensor and encoding, across plans), the caches
    `kiln_plan.cache` ops; the entry functions and `kiln.kv_cache`
    declarations are replaced. The module must be fused (`kiln-fuse-graph`).

    Before:
    ```mlir
    func.func @decode(%ids: tensor<?xi32>, ...) -> (tensor<?x16xf32>, ...) {
      %t = kiln.weight "model.embed_tokens.weight" : tensor<16x8xbf16>
      %h = kiln.embedding %t[%ids] : ... -> tensor<?x8xf32>
      ...
    ```
    After:
    ```mlir
    kiln_plan.weight @w0 dense "model.embed_tokens.weight" bf16 shape [16, 8]
    kiln_plan.plan @decode {
      %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
      ...
      %h = kiln_plan.buffer tokens "t5" row [8] f32
      kiln_plan.dispatch embedding(%ids, @w0, %h)
      ...
    ```
  }];
  let dependentDialects = ["::kiln::plan::PlanDialect"];
}

def KilnReuseBuffersPass : Pass<"kiln-reuse-buffers", "mlir::ModuleOp"> {
  let summary = "Share plan buffers between values that are not live at once";
  let description = [{
    A linear scan over each plan's dispatches: a buffer lives from the first
    dispatch that names it to the last (inputs and outputs to the end). When
    a buffer first appears it takes the most recently freed buffer of the
    same rows, element type and row shape, else it stays its own; buffers
    are freed after their last dispatch, so a dispatch never writes a
    buffer that one of its inputs occupies. Buffers are renamed `t<index>`
    afterwards (`logits` and `hidden` for the outputs).

    Before:
    ```mlir
    %a = kiln_plan.buffer tokens "t5" row [8] f32
    %b = kiln_plan.buffer tokens "t6" row [8] f32
    %c = kiln_plan.buffer tokens "t7" row [8] f32
    kiln_plan.dispatch silu(%a, %b)
    kiln_plan.dispatch silu(%b, %c)
    ```
    After (`%a` is dead once the first silu has read it):
    ```mlir
    %a = kiln_plan.buffer tokens "t5" row [8] f32
    %b = kiln_plan.buffer tokens "t6" row [8] f32
    kiln_plan.dispatch silu(%a, %b)
    kiln_plan.dispatch silu(%b, %a)
    ```
  }];
}

def KilnSelectHostKernelsPass
    : Pass<"kiln-select-host-kernels", "mlir::ModuleOp"> {
  let summary = "Choose the kernels compiled into the artifact's x86-64 code";
  let description = [{
    Sets the module attribute `kiln_plan.host_kernels` to the kernels (by
    their Kernels.td names, sorted) that the plans dispatch and the x86-64
    generator (passes/codegen/x86) implements: the artifact writer compiles
    exactly these into the host code object, and the CPU runtime runs their
    dispatches there. Runs after `kiln-build-plan`; kiln-compile leaves it
    out for `--no-host-kernels` and for artifacts without the cpu target.

    ```mlir
    module attributes {kiln_plan.host_kernels = ["add", "rms_norm", "silu"]} {
      ...
    ```
  }];
  let dependentDialects = ["::kiln::plan::PlanDialect"];
}

def KilnReportMemoryPass : Pass<"kiln-report-memory", "mlir::ModuleOp"> {
  let summary = "Print the bytes of a plan-level module's weights and KV cache";
  let description = [{
    For a plan-level module (kiln-build-plan), prints its weights' stored
    bytes by group (routed experts, shared experts, MLA attention, the DSA
    indexer, dense MLPs, embedding and head, the rest; groups come from the
    checkpoint tensor names), the KV cache bytes per token by owner (the
    main model's caches, the MTP draft's), and with `device-gb` the tokens
    of KV cache that fit beside the weights on a device of that size.
    `kiln-compile --emit=memory` runs it on every rank's share (--tp, --ep).
    The IR is left as it is.

    ```sh
    kiln-compile DIR --config-only --tp 4 --ep 2 --emit=memory
    kiln-opt plan.mlir -kiln-report-memory="label=rank0 device-gb=288"
    ```
  }];
  let options = [
    Option<"label", "label", "std::string", "\"\"",
           "Printed after the pass name (e.g. the rank)">,
    Option<"deviceGb", "device-gb", "double", "0",
           "A device's memory in GB (1e9 bytes); 0: not reported">,
  ];
}

def KilnEstimateCostPass : Pass<"kiln-estimate-cost", "mlir::ModuleOp"> {
  let summary = "Predict a plan step's time on an AMD GPU from its roofline";
  let description = [{
    For plan `plan` of a plan-level module (kiln-build-plan; e.g.
    `kiln-compile --config-only --emit=plan` of a full-size config), a batch
    of `batch` sequences each holding `context` cached positions, and chip
    `chip` (gfx950: MI355X, gfx942: MI300X), prints every kernel's HBM bytes,
    FLOPs and roofline time, the slowest dispatches, and the step's predicted
    time beside its bandwidth floor (passes/CostModel.h, docs/cost-model.md).
    A prediction from published peaks, not a measurement. The IR is left as
    it is.

    ```sh
    kiln-opt plan.mlir -kiln-estimate-cost="chip=gfx950 batch=64 context=20000"
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"gfx950\"",
           "gfx950 (MI355X) or gfx942 (MI300X)">,
    Option<"plan", "plan", "std::string", "\"decode\"", "The plan to cost">,
    Option<"batch", "batch", "int64_t", "1",
           "Sequences per step (rows of the plan)">,
    Option<"context", "context", "int64_t", "2048",
           "Positions each sequence holds before the step">,
    Option<"top", "top", "int64_t", "8", "Slowest dispatches listed">,
  ];
}

#endif // KILN_PASSES_TD
