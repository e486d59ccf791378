//===- EmitPasses.td - Passes of the emission layer --------*- tablegen -*-===//
//
// Passes over the kiln_plan level that need the emission layer's weight
// forms and GPU lowering (passes/emit), registered with Kiln's other
// passes (registerAllKilnEmitPasses).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_EMIT_PASSES_TD
#define KILN_EMIT_PASSES_TD

include "mlir/Pass/PassBase.td"

def KilnLowerGpuLaunchesPass
    : Pass<"kiln-lower-gpu-launches", "mlir::ModuleOp"> {
  let summary = "Decide how each plan dispatch runs on a GPU";
  let description = [{
    For an artifact with GPU targets: lowers every `kiln_plan.dispatch` to
    its GPU kernel launches (passes/emit/GpuLaunch.h: the kernel families
    GpuLowerBasic, GpuLowerData, GpuLowerMoe and GpuLowerAttention) and
    records them on the op as `gpu_launches` (`#kiln_plan.launch`: kernel
    symbol without the chip, grid, arguments) and `gpu_scratch`. The
    lowering reads each weight's stored form, decided from its
    `kiln_plan.weight` and the readers of it (storedForm, after
    chooseWeightLayouts): an MXFP4 weight a matmul reads gets a copy in the
    GPU matmul layout. A dispatch no kernel covers keeps no launches and
    runs on the CPU; when `targets` has no `cpu`, that is an error at the
    dispatch. The artifact writer takes the launches from here.

    ```mlir
    kiln_plan.dispatch rms_norm(%0, @w1, %1) {eps = 9.99999974E-6 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c64_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
    ```
  }];
  let options = [
    Option<"targets", "targets", "std::string", "\"cpu,gfx950\"",
           "the artifact's targets (kiln-compile --target): with cpu a "
           "dispatch may stay on the host">,
    Option<"decodeAttention", "decode-attention", "std::string",
           "\"vector\"",
           "MLA attention and the DSA indexer's scores in decode plans: "
           "vector (a workgroup per (token, head), its keys split over "
           "workgroups) or mfma (f32 MFMAs: 16 heads a workgroup sharing "
           "the latent rows they read; indexer tiles of 16 keys x 16 "
           "heads)">,
    Option<"fp8Gemm", "fp8-gemm", "std::string", "\"bf16\"",
           "GEMMs over Fp8Block128 weights (dense and MoE experts): bf16 "
           "(the weights decoded to bf16 in registers, bf16 activations, "
           "bf16 MFMAs) or fp8 (the activations quantized to FP8 per 1 x "
           "128 block in the kernel, FP8 MFMAs)">,
  ];
  let dependentDialects = ["::kiln::plan::PlanDialect"];
}

def KilnGenerateGpuKernelsPass
    : Pass<"kiln-generate-gpu-kernels", "mlir::ModuleOp"> {
  let summary = "Generate the GPU kernels the plans' launches name, as IR";
  let description = [{
    Appends `gpu.module @kiln_kernels` with one `gpu.func` per distinct
    kernel of the dispatches' `gpu_launches` (after
    `kiln-lower-gpu-launches`), specialized for `chip`: the IR the artifact
    writer lowers through `convert-gpu-to-rocdl` to the chip's code object
    (passes/codegen/rocdl, docs/gpu.md), here to read or FileCheck. A module
    that has the gpu.module already gets it replaced.

    ```sh
    kiln-opt plan.mlir -kiln-lower-gpu-launches -kiln-generate-gpu-kernels=chip=gfx942
    ```
  }];
  let options = [
    Option<"chip", "chip", "std::string", "\"gfx950\"",
           "the target: gfx950 or gfx942">,
  ];
}

#endif // KILN_EMIT_PASSES_TD
