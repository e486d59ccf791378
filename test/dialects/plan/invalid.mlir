// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// One case per verifier message of the kiln_plan dialect.

// expected-error @below {{shape dimensions must be positive}}
kiln_plan.weight @w0 dense "embed" bf16 shape [16, 0]

// -----

// expected-error @below {{attribute 'experts_from' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
kiln_plan.weight @w0 dense "e.{e}" bf16 shape [4, 8, 8] {experts_from = -4 : i64}

// -----

// expected-error @below {{holds 8 experts but its leading dimension is 4}}
kiln_plan.weight @w0 dense "e.{e}" bf16 shape [4, 8, 8] {experts = 8 : i64}

// -----

// expected-error @below {{a mxfp4_raw weight names its scales' tensor}}
kiln_plan.weight @w0 mxfp4_raw "proj" f4E2M1FN shape [8, 32]

// -----

// A dense weight names scales only as f32: an FP8 or MXFP4 source
// dequantized at compile time (test/dialects/plan/ops.mlir has the valid
// form).
// expected-error @below {{a dense weight names scales only as f32 (an FP8 or MXFP4 source dequantized at compile time), found 'bf16'}}
kiln_plan.weight @w0 dense "proj" bf16 shape [8, 32] {scales = "s"}

// -----

kiln_plan.plan @decode {
  // expected-error @below {{row dimensions must be positive}}
  %h = kiln_plan.buffer tokens "t0" row [0] f32
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  // expected-error @below {{is an input after the first buffer that is not: inputs come first}}
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  // expected-error @below {{names no declared kernel: 'frobnicate'}}
  kiln_plan.dispatch frobnicate(%h)
  kiln_plan.return
}

// -----

kiln_plan.weight @w0 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{rms_norm: parameter 'eps' is missing}}
  kiln_plan.dispatch rms_norm(%h, @w0, %o)
  kiln_plan.return
}

// -----

kiln_plan.weight @w0 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{rms_norm: parameter 'eps' must be an f32}}
  kiln_plan.dispatch rms_norm(%h, @w0, %o) {eps = 1 : i64}
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{top_k: parameter 'k' must be an i64}}
  kiln_plan.dispatch top_k(%h, %o, %o) {k = 2.0 : f32}
  kiln_plan.return
}

// -----

kiln_plan.weight @w0 dense "router" bf16 shape [4, 8]
kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{moe: parameter 'norm_topk_prob' must be a bool}}
  kiln_plan.dispatch moe(%h, @w0, @w0, @w0, @w0, @w0, none, none, none, %o) {top_k = 2 : i64, n_group = 1 : i64, topk_group = 1 : i64, norm_topk_prob = 1 : i64, block_size = 16 : i64, scale = 1.0 : f32, expert_offset = 0 : i64}
  kiln_plan.return
}

// -----

kiln_plan.weight @w0 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{rms_norm: 'theta' is not a parameter of rms_norm}}
  kiln_plan.dispatch rms_norm(%h, @w0, %o) {eps = 1.0e-05 : f32, theta = 1.0 : f32}
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{an argument is a buffer index, a symbol or unit (none), found "x"}}
  "kiln_plan.dispatch"(%h, %o) {kernel = "silu", args = [0 : i32, "x"], params = {}} : (!kiln_plan.buffer, !kiln_plan.buffer) -> ()
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{buffer arguments must name the operands in order}}
  "kiln_plan.dispatch"(%h, %o) {kernel = "silu", args = [1 : i32, 0 : i32], params = {}} : (!kiln_plan.buffer, !kiln_plan.buffer) -> ()
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{has 2 buffer operands but 1 buffer arguments}}
  "kiln_plan.dispatch"(%h, %o) {kernel = "silu", args = [0 : i32, unit], params = {}} : (!kiln_plan.buffer, !kiln_plan.buffer) -> ()
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
^bb0(%h: !kiln_plan.buffer):
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{buffer operands must be kiln_plan.buffer results}}
  kiln_plan.dispatch silu(%h, %o)
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{embedding: @nothing names no kiln_plan.weight or kiln_plan.cache}}
  kiln_plan.dispatch embedding(%ids, @nothing, %o)
  kiln_plan.return
}

// -----

// The structural check shared with the runtime (support/abi/Signature.h).
kiln_plan.cache @c0 width 8 owner "main" : bf16
kiln_plan.plan @decode {
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  %o = kiln_plan.buffer tokens "t1" row [8] f32
  // expected-error @below {{embedding: args[1] 'table': is a Cache, expected a Weight}}
  kiln_plan.dispatch embedding(%ids, @c0, %o)
  kiln_plan.return
}

// -----

kiln_plan.weight @w0 dense "proj" bf16 shape [8, 8]
kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  // expected-error @below {{matmul: args[2] 'out': is the same buffer as args[0] 'x', but matmul cannot work in place}}
  kiln_plan.dispatch matmul(%h, @w0, %h)
  kiln_plan.return
}

// -----

kiln_plan.plan @decode {
  %h = kiln_plan.buffer tokens "t0" row [8] f32
  %o = kiln_plan.buffer tokens "t1" row [8] i32
  // expected-error @below {{silu: args[1] 'out'}}
  kiln_plan.dispatch silu(%h, %o)
  kiln_plan.return
}

// -----

// expected-error @below {{unknown kiln_plan attribute 'kiln_plan.colour'}}
module attributes {kiln_plan.colour = 1 : i64} {}

// -----

// expected-error @below {{'kiln_plan.host_kernels' is an array of kernel names on the module}}
module attributes {kiln_plan.host_kernels = "silu"} {}

// -----

// expected-error @below {{'kiln_plan.host_kernels' names no declared kernel: "frobnicate"}}
module attributes {kiln_plan.host_kernels = ["silu", "frobnicate"]} {}

// -----

// expected-error @below {{slice must be [axis, first] with axis 0 (rows) or 1 (columns) and first >= 0}}
kiln_plan.weight @w0 dense "o" bf16 shape [8, 8] {slice = array<i64: 3, 0>}

// -----

// expected-error @below {{slice needs a matrix (or a stack of them) or a vector (axis 0)}}
kiln_plan.weight @w0 dense "n" f32 shape [8] {slice = array<i64: 1, 8>}

// -----

// expected-error @below {{a mxfp4_raw weight's slice must start on a multiple of 32, found 16}}
kiln_plan.weight @w0 mxfp4_raw "o" f4E2M1FN shape [8, 64] {scales = "o_scale", slice = array<i64: 1, 16>}

// -----

// expected-error @below {{a fp8_block weight's slice must start on a multiple of 128, found 64}}
kiln_plan.weight @w0 fp8_block "o" f8E4M3FN shape [64, 128] {scales = "o_scale", slice = array<i64: 0, 64>}

// -----

// An mxfp4_dequant weight (Kiln's MXFP4 stored dequantized) is f32.
// expected-error @below {{an mxfp4_dequant weight is stored as f32, found 'bf16'}}
kiln_plan.weight @w0 mxfp4_dequant "proj" bf16 shape [8, 32]

// -----

// GPU launches (kiln-lower-gpu-launches): the attribute's own rules.
kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch grid axis 1: mul and add >= 0, div >= 1 and `of` >= 0, got (0, 1, 0)}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 0), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch grid has 2 axes, expected 3}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch kernel 'rms_norm_c8' is not a Kiln kernel symbol}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"rms_norm_c8", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{unknown GPU argument part 'weights'}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, weights 1, data 2]>]}
  kiln_plan.return %b
}

// -----

// Against the dispatch: argument indices, rows_of, scratch buffers.
kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch 0 (kiln_rms_norm_c8_epsX3727c5ac): argument 2 (data 3) is out of range: the dispatch has 3 arguments}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 3]>]}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch 0 (kiln_rms_norm_c8_epsX3727c5ac): grid axis 0 counts the rows of argument 5 of 3}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1) of 5, (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch 0 (kiln_rms_norm_c8_epsX3727c5ac): argument 1 (scratch 1) is out of range: the dispatch has 1 scratch buffers}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, scratch 1, data 2]>], gpu_scratch = array<i64: 32, 0, 0>}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{gpu_scratch holds (per_row, fixed, per_position) triples of byte counts >= 0}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>], gpu_scratch = array<i64: 32, 0>}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{has gpu_scratch without gpu_launches}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_scratch = array<i64: 32, 0, 0>}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{gpu_launches is empty, which only all_gather_rows (the communicator's alone) may be}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = []}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch grid axis 0: mul and add >= 0, div >= 1 and `of` >= 0, got (1, 0, 1) of -2}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1) of -2, (0, 1, 1), (0, 1, 1)], args [data 0, data 1, data 2]>]}
  kiln_plan.return %b
}

// -----

kiln_plan.weight @w1 dense "norm" f32 shape [8]
kiln_plan.plan @decode {
  %a = kiln_plan.buffer tokens "t1" row [8] f32
  %b = kiln_plan.buffer tokens "t2" row [8] f32
  // expected-error @below {{launch argument 1: data takes an index >= 0, got -1}}
  kiln_plan.dispatch rms_norm(%a, @w1, %b) {eps = 1.0e-05 : f32} attributes {gpu_launches = [#kiln_plan.launch<"kiln_rms_norm_c8_epsX3727c5ac", grid [(1, 0, 1), (0, 1, 1), (0, 1, 1)], args [data 0, data -1, data 2]>]}
  kiln_plan.return %b
}
