// RUN: kiln-opt %s -kiln-select-host-kernels | FileCheck %s
// RUN: kiln-opt %s -kiln-select-host-kernels | kiln-opt | FileCheck %s

// The kernels dispatched that the x86-64 generator implements, sorted, once
// each; matmul and embedding have no compiled form.
// CHECK: module attributes {kiln_plan.host_kernels = ["add", "rms_norm", "silu"]}
kiln_plan.weight @w0 dense "embed" bf16 shape [16, 8]
kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  %c = kiln_plan.buffer tokens "t3" row [8] f32
  kiln_plan.dispatch embedding(%ids, @w0, %a)
  kiln_plan.dispatch silu(%a, %b)
  kiln_plan.dispatch rms_norm(%b, @w1, %c) {eps = 1.0e-05 : f32}
  kiln_plan.dispatch add(%c, %a, %b)
  kiln_plan.dispatch silu(%b, %c)
  kiln_plan.dispatch matmul(%c, @w0, %a)
  kiln_plan.return %a
}
