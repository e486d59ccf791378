// RUN: kiln-opt %s -kiln-report-memory="label=rank1 device-gb=1" | FileCheck %s
// RUN: kiln-opt %s -kiln-report-memory | FileCheck %s --check-prefix=NODEV

// Stored bytes: dense bf16 2 per value, f32 4; MXFP4 0.5 + 1/32 (a scale
// per 32 values); FP8 1 + 4 / (128 x 128). Caches: width x element bytes.
// CHECK: kiln-report-memory: rank1
// 2 x 4 x 64 x 0.53125 + 128 x 64 x 0.53125 + 256 x 256 x (1 + 4 / 16384)
// + 8 x 4 + 32 x 8 x 2 + 8 x 8 x 2 + 8 x 8 x 2 + 16 x 8 x 2 = 71232
// CHECK-NEXT: weights {{ *}}71232 B
// CHECK-NEXT: routed experts {{ *}}272 B
// CHECK-NEXT: shared experts {{ *}}4352 B
// CHECK-NEXT: attention (MLA) {{ *}}65552 B
// CHECK-NEXT: indexer {{ *}}128 B
// CHECK-NEXT: dense MLPs {{ *}}512 B
// CHECK-NEXT: embedding and head {{ *}}384 B
// CHECK-NEXT: other {{ *}}32 B
// CHECK-NEXT: KV cache per token {{ *}}368 B (draft 160 B in 1 caches, main 208 B in 2 caches)
// (1e9 - 71232) / 368 = 2717197.7 tokens
// CHECK-NEXT: on a device of {{ *}}1 GB: 1.000 GB left, 2717198 tokens of KV cache
// NODEV-NOT: on a device of
kiln_plan.weight @w0 mxfp4_quant "l1.mlp.experts.{e}.up_proj.weight" f4E2M1FN shape [2, 4, 64] {experts = 2 : i64}
kiln_plan.weight @w1 mxfp4_raw "l1.mlp.shared_experts.down_proj.weight" f4E2M1FN shape [128, 64] {scales = "l1.mlp.shared_experts.down_proj.weight_scale"}
kiln_plan.weight @w2 fp8_block "l0.self_attn.o_proj.weight" f8E4M3FN shape [256, 256] {scales = "l0.self_attn.o_proj.weight_scale_inv"}
kiln_plan.weight @w3 dense "l0.input_layernorm.weight" f32 shape [8]
kiln_plan.weight @w4 dense "l0.mlp.up_proj.weight" bf16 shape [32, 8]
kiln_plan.weight @w5 dense "l0.self_attn.indexer.wk.weight" bf16 shape [8, 8]
kiln_plan.weight @w6 dense "model.embed_tokens.weight" bf16 shape [8, 8]
kiln_plan.weight @w7 dense "lm_head.weight" bf16 shape [16, 8]
kiln_plan.cache @l0.latent width 40 owner "main" : f32
kiln_plan.cache @l0.index width 24 owner "main" : bf16
kiln_plan.cache @l1.latent width 40 owner "draft" : f32
