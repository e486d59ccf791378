//===- KilnDialect.td - The kiln dialect -------------------*- tablegen -*-===//
//
// The dialect, its attributes and enums. Ops are in KilnOps.td.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_TD
#define KILN_DIALECT_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Kiln_Dialect : Dialect {
  let name = "kiln";
  let cppNamespace = "::kiln";
  let summary = "Graph- and fused-level ops for GLM mixture-of-experts models";
  let description = [{
    The `kiln` dialect carries a GLM 5.x / GLM-4.x model from the checkpoint
    importer (`frontends/glm`) to per-target code generation.

    It has two levels that coexist in one module:

    * **Graph level**, what the frontend emits: fine-grained ops
      (`kiln.matmul`, `kiln.dequantize`, `kiln.rms_norm`, `kiln.rope`,
      `kiln.sigmoid`, `kiln.top_k`, `kiln.gather`, ...). The MoE router is
      written out op by op; fusing it is a pass's job.
    * **Fused level**, what the passes produce: `kiln.moe` (route, group tokens
      by expert, grouped expert GEMMs with SwiGLU, weighted combine and the
      shared expert) and `kiln.mx_matmul` (block-scaled dequantize + GEMM).
      A `kiln.moe` reads its MXFP4 or FP8 expert weights as
      `!kiln.block_scaled` values (values, scales and block shape in one
      value, made by `kiln.block_scaled`) and dequantizes them inside its
      GEMMs.

    Weights never enter the IR: `kiln.weight` names a tensor of the checkpoint
    and says how its bytes are stored. The compiler streams the data into the
    artifact separately.

    Activations use builtin ranked tensors whose leading dimension is the
    dynamic token count. Entry points are `func.func` ops named `prefill`,
    `decode` and `draft`, taking token ids, sequence ids and positions.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  let hasOperationAttrVerify = 1;
}

class Kiln_Op<string mnemonic, list<Trait> traits = []>
    : Op<Kiln_Dialect, mnemonic, traits>;

class Kiln_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Kiln_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

class Kiln_Type<string name, string typeMnemonic, list<Trait> traits = []>
    : TypeDef<Kiln_Dialect, name, traits> {
  let mnemonic = typeMnemonic;
}

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Kiln_RopeStyle : I32EnumAttr<"RopeStyle", "rotary embedding layout", [
    I32EnumAttrCase<"interleaved", 0>,
    I32EnumAttrCase<"neox", 1>]> {
  let cppNamespace = "::kiln";
  let genSpecializedAttr = 0;
  let description = [{
    `interleaved` (GPT-J) rotates pairs (2i, 2i+1); `neox` (rotate-half)
    rotates pairs (i, i + rotary_dim/2).
  }];
}
def Kiln_RopeStyleAttr : EnumAttr<Kiln_Dialect, Kiln_RopeStyle, "rope_style">;

def Kiln_StorageKind : I32EnumAttr<"StorageKind", "how a weight is stored", [
    I32EnumAttrCase<"raw", 0>,
    I32EnumAttrCase<"mxfp4_values", 1>,
    I32EnumAttrCase<"mxfp4_scales", 2>]> {
  let cppNamespace = "::kiln";
  let description = [{
    `raw`: the checkpoint's bytes as they are (f4E2M1FN elements packed two
    per byte, low nibble first; f8E8M0FNU and f8E4M3FN one byte each).
    `mxfp4_values` / `mxfp4_scales`: the E2M1 elements / E8M0 block scales
    that Kiln produces by quantizing the named float tensor while streaming
    it into the artifact. `mxfp4_values` on f32 elements: those E2M1 values
    times their block scales, stored as f32 (a tensor-parallel slice that
    cuts the 32-value blocks: kiln-partition-tensor).
  }];
}

def Kiln_ScaleRule : I32EnumAttr<"ScaleRule", "MXFP4 block-scale rule", [
    I32EnumAttrCase<"even", 0>,
    I32EnumAttrCase<"floor", 1>]> {
  let cppNamespace = "::kiln";
  let description = [{
    `even`: Quark's default, the block maximum is first rounded to E2M1
    precision, then the scale is 2^(floor(log2 amax) - 2). `floor`: the OCP
    rule 2^(floor(log2 amax) - 2) on the unrounded maximum.
  }];
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

def Kiln_EncodingAttr : Kiln_Attr<"Encoding", "encoding"> {
  let summary = "how the bytes of an external weight are stored";
  let description = [{
    Attached to `kiln.weight`. `raw` means the tensor is stored exactly as the
    checkpoint holds it. `mxfp4_values` and `mxfp4_scales` mean Kiln
    quantizes the named BF16/F32/FP8 source tensor to MXFP4 (OCP MX v1.0,
    blocks of 32 along the last dimension) with the given scale rule.

    ```mlir
    #kiln.encoding<raw>
    #kiln.encoding<mxfp4_values, even>
    ```
  }];
  let parameters = (ins
    EnumParameter<Kiln_StorageKind>:$kind,
    OptionalParameter<"std::optional<::kiln::ScaleRule>">:$rule);
  let assemblyFormat = "`<` $kind (`,` $rule^)? `>`";
  let genVerifyDecl = 1;
}

def Kiln_RouterAttr : Kiln_Attr<"Router", "router"> {
  let summary = "the MoE router the checkpoint declares";
  let description = [{
    The module attribute `kiln.router`, set by the frontend from config.json
    and read by `kiln-fuse-moe-routing`, which fuses only a router subgraph
    that computes exactly this (GLM.md section 3.2). `top_k` is
    `num_experts_per_tok`; the expert count is the router weight's and is
    checked with these settings where `kiln.moe` is verified
    (support/abi/MoeRules.h).

    ```mlir
    module attributes {kiln.router = #kiln.router<top_k = 4, n_group = 1,
        topk_group = 1, norm_topk_prob = true,
        routed_scaling_factor = 2.5 : f32>}
    ```
  }];
  let parameters = (ins
    "int64_t":$top_k,
    "int64_t":$n_group,
    "int64_t":$topk_group,
    "bool":$norm_topk_prob,
    "::mlir::FloatAttr":$routed_scaling_factor);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

def Kiln_BlockScaledType : Kiln_Type<"BlockScaled", "block_scaled"> {
  let summary = "a block-scaled tensor: values and one scale per block";
  let description = [{
    The tensor `values[..., i, j] * scales[..., i / B0, j / B1]` with
    `block = [B0, B1]` over the last two dimensions, kept as its two parts
    (the rules of `kiln.dequantize`):

    * MXFP4: `f4E2M1FN` values, `f8E8M0FNU` scales, block `[1, 32]`.
    * FP8 (official GLM FP8): `f8E4M3FN` values, `f32` scales, any block
      (`[128, 128]` in the checkpoints).

    The scales have the values' shape with the last two dimensions divided
    by the block, rounded up. Made by `kiln.block_scaled`; `kiln.moe` reads
    its expert weights in this form and dequantizes them inside its GEMMs.

    ```mlir
    !kiln.block_scaled<tensor<16x128x256xf4E2M1FN>, tensor<16x128x8xf8E8M0FNU>, [1, 32]>
    ```
  }];
  let parameters = (ins "::mlir::RankedTensorType":$values,
                        "::mlir::RankedTensorType":$scales,
                        ArrayRefParameter<"int64_t">:$block);
  let assemblyFormat = "`<` $values `,` $scales `,` `[` $block `]` `>`";
  let genVerifyDecl = 1;
}

#endif // KILN_DIALECT_TD
