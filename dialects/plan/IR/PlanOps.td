//===- PlanOps.td - The kiln_plan dialect -------------------*- tablegen -*-===//
//
// The plan level: what the fused `kiln` functions become before the artifact
// is written. A plan is a list of kernel dispatches (support/abi/Kernels.td)
// over activation buffers, naming the program's weights and caches by
// symbol. `kiln-build-plan` produces it, `kiln-reuse-buffers` shares buffers
// between values that are not live at once, and one final translation
// (passes/emit/PlanReader.cpp) reads it into the artifact.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PLAN_OPS_TD
#define KILN_PLAN_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

def Plan_Dialect : Dialect {
  let name = "kiln_plan";
  let cppNamespace = "::kiln::plan";
  let summary = "Execution plans: buffers, kernel dispatches, weights, caches";
  let description = [{
    The level between the fused `kiln` graph and the artifact. A module holds
    the program's weights (`kiln_plan.weight`) and caches
    (`kiln_plan.cache`), shared by its plans (`kiln_plan.plan @prefill`,
    `@decode`, `@draft`). A plan's body declares its buffers
    (`kiln_plan.buffer`: a row kind and the shape of one row; the row count
    is a call's) and then dispatches kernels over them in order; every
    dispatch is checked against its kernel's declaration
    (support/abi/Kernels.td) by the verifier, with the same function the
    runtime runs when it loads the plan.

    ```mlir
    kiln_plan.weight @w0 dense "model.embed_tokens.weight" bf16 shape [256, 64]
    kiln_plan.plan @decode {
      %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
      %h = kiln_plan.buffer tokens "t5" row [64] f32
      kiln_plan.dispatch embedding(%ids, @w0, %h)
      kiln_plan.return %h
    }
    ```
  }];
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// The module attribute kiln-select-host-kernels sets: the kernels
    /// compiled into the artifact's x86-64 code object.
    static constexpr ::llvm::StringLiteral kHostKernelsAttrName =
        "kiln_plan.host_kernels";
    /// Adds the attributes (PlanAttrs.cpp).
    void registerAttributes();
  }];
}

def Plan_BufferType : TypeDef<Plan_Dialect, "Buffer"> {
  let mnemonic = "buffer";
  let summary = "an activation buffer; its rows and row shape are its op's";
}

class Plan_Op<string mnemonic, list<Trait> traits = []>
    : Op<Plan_Dialect, mnemonic, traits>;

def Plan_Rows : I32EnumAttr<"Rows", "how many rows a buffer has per call", [
    I32EnumAttrCase<"tokens", 0>,
    I32EnumAttrCase<"selected", 1>,
    I32EnumAttrCase<"one", 2>,
    I32EnumAttrCase<"gathered", 3>,
    I32EnumAttrCase<"routed", 4>]> {
  let cppNamespace = "::kiln::plan";
  let description = [{
    `tokens`: one row per token of the call; `selected`: one per logit row the
    caller asked for; `one`: a single row; `gathered`: one per token of
    every data-parallel rank (`kiln.all_gather_rows`); `routed`: one per row
    this rank received in the last `kiln.dispatch_rows` (at most `gathered`).
    The order of fb::Rows.
  }];
}

def Plan_WeightKind : I32EnumAttr<"WeightKind",
    "how an artifact weight is produced from the checkpoint", [
    I32EnumAttrCase<"dense", 0>,
    I32EnumAttrCase<"fp8_block", 1>,
    I32EnumAttrCase<"mxfp4_raw", 2>,
    I32EnumAttrCase<"mxfp4_quant", 3>,
    I32EnumAttrCase<"mxfp4_dequant", 4>]> {
  let cppNamespace = "::kiln::plan";
  let description = [{
    `dense`: a float tensor copied (rank-1 ones upcast to f32), or, f32 with
    `scales`, an FP8 or Quark MXFP4 source dequantized;
    `fp8_block`: F8E4M3 values with f32 128x128 block scales, copied;
    `mxfp4_raw`: Quark MXFP4 values and E8M0 scales, copied;
    `mxfp4_quant`: quantized to MXFP4 by Kiln from a float (or FP8) source;
    `mxfp4_dequant`: as `mxfp4_quant`, then stored as f32 values times
    their block scales (a tensor-parallel slice that cuts the blocks).
  }];
}

def Plan_GpuArgPart : I32EnumAttr<"GpuArgPart",
    "what a GPU kernel argument binds", [
    I32EnumAttrCase<"data", 0>,
    I32EnumAttrCase<"scales", 1>,
    I32EnumAttrCase<"scratch", 2>,
    I32EnumAttrCase<"rows", 3>,
    I32EnumAttrCase<"cache_capacity", 4>,
    I32EnumAttrCase<"raw_data", 5>,
    I32EnumAttrCase<"raw_scales", 6>,
    I32EnumAttrCase<"rows_of", 7>,
    I32EnumAttrCase<"page_table", 8>,
    I32EnumAttrCase<"page_rows", 9>]> {
  let cppNamespace = "::kiln::plan";
  let description = [{
    `data N`: dispatch argument N's device data (a buffer, a cache, a
    weight's values in the GPU layout); `scales N`: weight N's scales;
    `scratch N`: the dispatch's scratch buffer N; `rows`: the i32 row count
    R; `cache_capacity`: the i32 positions per cache slot; `raw_data N`,
    `raw_scales N`: weight N in the artifact's own layout even where a GPU
    copy exists; `rows_of N`: the i32 row count of dispatch argument N;
    `page_table`: the i32 page ids of the caches' pages, [slots, capacity /
    page rows]; `page_rows`: the i32 rows per cache page. The order of the
    artifact's GpuArgPart.
  }];
}

class Plan_Attr<string name, string attrMnemonic>
    : AttrDef<Plan_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def Plan_GpuLaunchAttr : Plan_Attr<"GpuLaunch", "launch"> {
  let summary = "one GPU kernel launch of a dispatch";
  let description = [{
    The kernel by its symbol without the chip (passes/codegen/rocdl
    KernelSpec: the symbol spells the whole specialization), the grid, and
    the kernel's arguments in order. Grid axis i has
    ceil((R * mul + add) / div) workgroups, R the dispatch's rows or, with
    `of N`, the row count of dispatch argument N.

    ```mlir
    #kiln_plan.launch<"kiln_rms_norm_c64_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>
    ```
  }];
  let parameters = (ins StringRefParameter<"the kernel symbol">:$kernel,
      ArrayRefParameter<"int64_t", "mul, add, div, rows_of per axis">:$grid,
      ArrayRefParameter<"int64_t", "part, index per argument">:$args);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    static constexpr size_t kAxisFields = 4, kArgFields = 2;
    /// Every part but `rows`, `cache_capacity`, `page_table` and
    /// `page_rows` names an index.
    static bool takesIndex(GpuArgPart part) {
      return part != GpuArgPart::rows && part != GpuArgPart::cache_capacity &&
             part != GpuArgPart::page_table && part != GpuArgPart::page_rows;
    }
    size_t getNumArgs() const { return getArgs().size() / kArgFields; }
    GpuArgPart getArgPart(size_t i) const {
      return static_cast<GpuArgPart>(getArgs()[kArgFields * i]);
    }
    int64_t getArgIndex(size_t i) const {
      return getArgs()[kArgFields * i + 1];
    }
  }];
}

def Plan_WeightOp : Plan_Op<"weight", [Symbol]> {
  let summary = "a weight of the program, streamed from the checkpoint";
  let description = [{
    `source` is the checkpoint tensor (`{e}` for an expert stack), `dtype`
    the element type stored, `shape` the logical shape (`[E,] N, K`).
    `scales` names the block scales' tensor (FP8, Quark MXFP4; for
    `mxfp4_quant` and `mxfp4_dequant` the FP8 source's scales, if any; for
    an f32 `dense` weight the scales of the FP8 or MXFP4 source it is
    dequantized from); `experts` and
    `experts_from` describe a stack that holds experts `experts_from` ..
    `experts_from + experts - 1`; `floor` selects the OCP scale rule for
    `mxfp4_quant` and `mxfp4_dequant` (else Quark's `even`). `slice = [A, F]` takes rows
    (A = 0) or columns (A = 1) F .. F + shape[A] - 1 of each source matrix
    (and the matching scale blocks): one rank's share under tensor
    parallelism.

    ```mlir
    kiln_plan.weight @w3 mxfp4_quant "model.layers.1.mlp.experts.{e}.up_proj.weight" f4E2M1FN shape [16, 128, 256] {experts = 16 : i64}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$source,
      Plan_WeightKind:$kind, TypeAttr:$dtype, DenseI64ArrayAttr:$shape,
      OptionalAttr<StrAttr>:$scales,
      ConfinedAttr<DefaultValuedAttr<I64Attr, "0">, [IntNonNegative]>:$experts,
      ConfinedAttr<DefaultValuedAttr<I64Attr, "0">, [IntNonNegative]>:
          $experts_from,
      UnitAttr:$floor, OptionalAttr<DenseI64ArrayAttr>:$slice);
  let assemblyFormat =
      "$sym_name $kind $source $dtype `shape` $shape attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Stored bytes per value: the values and their share of the block
    /// scales, as the artifact holds them for the CPU.
    double getBytesPerValue();
    /// getBytesPerValue() times the values of the whole shape.
    double getStoredBytes();
  }];
}

def Plan_CacheOp : Plan_Op<"cache", [Symbol]> {
  let summary = "a per-sequence, per-position cache of the program";
  let description = [{
    `width` values of `element_type` per (sequence, position); `owner` is the
    plan family that writes it (`main`: prefill and decode; `draft`: the MTP
    layer).

    ```mlir
    kiln_plan.cache @layer0.latent width 80 owner "main" : bf16
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
      ConfinedAttr<I64Attr, [IntPositive]>:$width, StrAttr:$owner,
      TypeAttrOf<AnyTypeOf<[F32, BF16]>>:$element_type);
  let assemblyFormat =
      "$sym_name `width` $width `owner` $owner attr-dict `:` $element_type";
  let extraClassDeclaration = [{
    /// Bytes of one (sequence, position) row.
    int64_t getRowBytes() {
      return int64_t(getWidth()) *
             int64_t(getElementType().getIntOrFloatBitWidth() / 8);
    }
  }];
}

def Plan_PlanOp : Plan_Op<"plan", [Symbol, IsolatedFromAbove, SingleBlock]> {
  let summary = "one entry point's dispatches over its buffers";
  let description = [{
    The body declares the plan's buffers (its inputs first, in the order of
    abi::PlanInput), dispatches kernels in order, and ends with
    `kiln_plan.return` of its outputs (logits, then the hidden state).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Plan_BufferOp : Plan_Op<"buffer", [HasParent<"PlanOp">]> {
  let summary = "an activation buffer of a plan";
  let description = [{
    `rows` rows per call (Plan_Rows), each of shape `row` and element type
    f32 or i32. `input` marks the plan's inputs.

    ```mlir
    %q = kiln_plan.buffer tokens "t7" row [4, 64] f32
    ```
  }];
  let arguments = (ins StrAttr:$name, Plan_Rows:$rows, UnitAttr:$input,
      DenseI64ArrayAttr:$row, TypeAttrOf<AnyTypeOf<[F32, I32]>>:$element_type);
  let results = (outs Plan_BufferType:$result);
  let assemblyFormat =
      "$rows $name (`input` $input^)? `row` $row $element_type attr-dict";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Values per row.
    int64_t getRowElems();
  }];
}

def Plan_DispatchOp : Plan_Op<"dispatch", [HasParent<"PlanOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "one kernel call";
  let description = [{
    The kernel (by its name in Kernels.td), its arguments in declared order
    — buffers by value, weights and caches by symbol, `none` for an absent
    optional one — and its parameters by name. The verifier checks them
    against the declaration (abi::signatureError) and that every symbol
    names a weight or cache.

    `kiln-lower-gpu-launches` adds how the dispatch runs on a GPU:
    `gpu_launches`, its kernel launches in order (`#kiln_plan.launch`), and
    `gpu_scratch`, its scratch buffers as (per_row, fixed, per_position)
    byte triples (per_row * R + per_position * R * capacity + fixed). Only
    `all_gather_rows` may have no launch: the device communicator runs it.

    ```mlir
    kiln_plan.dispatch rms_norm(%h, @w1, %n) {eps = 9.99999974E-6 : f32}
    kiln_plan.dispatch mla_attention(%qn, %qp, @w7, @layer0.latent, %seq, %pos, none, %o) {heads = 4 : i64, scale = 0.125 : f32}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, Variadic<Plan_BufferType>:$buffers,
      ArrayAttr:$args, DictionaryAttr:$params,
      OptionalAttr<TypedArrayAttrBase<Plan_GpuLaunchAttr, "GPU launches">>:
          $gpu_launches,
      OptionalAttr<DenseI64ArrayAttr>:$gpu_scratch);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// gpu_launches' argument and grid references against this dispatch.
    ::mlir::LogicalResult verifyGpuLaunches();
  }];
}

def Plan_ReturnOp : Plan_Op<"return", [HasParent<"PlanOp">, Terminator]> {
  let summary = "a plan's outputs";
  let arguments = (ins Variadic<Plan_BufferType>:$outputs);
  let assemblyFormat = "$outputs attr-dict";
}

#endif // KILN_PLAN_OPS_TD
