// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=0" -verify-diagnostics | FileCheck %s --check-prefix=R0
// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=1" -verify-diagnostics | FileCheck %s --check-prefix=R1
// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=1 rank=0" | FileCheck %s --check-prefix=ONE
// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=1" -verify-diagnostics | FileCheck %s --check-prefix=R1GONE
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=1" -verify-diagnostics | kiln-opt -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=R1

// R0-LABEL: func.func @moe
// R0-DAG: kiln.weight "l1.experts.{e}.gate" experts_from 0 : tensor<8x32x64xbf16>
// R0-DAG: kiln.weight "l1.experts.{e}.down" experts_from 0 : tensor<8x64x32xbf16>
// R0: %[[P:.*]] = kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} shared %{{.*}}, %{{.*}}, %{{.*}} top_k 4 groups 1 keep 1 scale 2.500000e+00 norm block_size 16 local_experts_from 0 :
// R0: %[[S:.*]] = kiln.all_reduce %[[P]] : tensor<?x64xf32>
// R0: kiln.add %{{.*}}, %[[S]]
// R1-LABEL: func.func @moe
// R1-NOT: shared_experts
// R1-DAG: kiln.weight "l1.experts.{e}.up" experts_from 8 : tensor<8x32x64xbf16>
// R1: %[[P:.*]] = kiln.moe %{{.*}} router %{{.*}} bias %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} top_k 4 groups 1 keep 1 scale 2.500000e+00 norm block_size 16 local_experts_from 8 :
// R1: kiln.all_reduce %[[P]]
// ONE-LABEL: func.func @moe
// ONE-NOT: all_reduce
// ONE-NOT: experts_from
func.func @moe(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  %g = kiln.weight "l1.experts.{e}.gate" : tensor<16x32x64xbf16>
  %u = kiln.weight "l1.experts.{e}.up" : tensor<16x32x64xbf16>
  %d = kiln.weight "l1.experts.{e}.down" : tensor<16x64x32xbf16>
  %sg = kiln.weight "l1.shared_experts.gate" : tensor<32x64xbf16>
  %su = kiln.weight "l1.shared_experts.up" : tensor<32x64xbf16>
  %sd = kiln.weight "l1.shared_experts.down" : tensor<64x32xbf16>
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d shared %sg, %su, %sd
         top_k 4 groups 1 keep 1 scale 2.5 norm block_size 16
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>, tensor<16x32x64xbf16>,
            tensor<16x32x64xbf16>, tensor<16x64x32xbf16>, tensor<32x64xbf16>,
            tensor<32x64xbf16>, tensor<64x32xbf16>) -> tensor<?x64xf32>
  %z = kiln.add %x, %y : tensor<?x64xf32>, tensor<?x64xf32> -> tensor<?x64xf32>
  return %z : tensor<?x64xf32>
}

// -----

func.func @uneven(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<3x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<3xf32>
  %g = kiln.weight "l1.experts.{e}.gate" : tensor<3x32x64xbf16>
  %u = kiln.weight "l1.experts.{e}.up" : tensor<3x32x64xbf16>
  %d = kiln.weight "l1.experts.{e}.down" : tensor<3x64x32xbf16>
  // expected-error @below {{3 experts do not split evenly over 2 ranks}}
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d
         top_k 2 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<3x64xbf16>, tensor<3xf32>, tensor<3x32x64xbf16>,
            tensor<3x32x64xbf16>, tensor<3x64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// Block-scaled stacks: values and scales are cut to the same experts, and
// the whole stacks go.
// R0-LABEL: func.func @block_scaled
// R1-LABEL: func.func @block_scaled
// R1-DAG: %[[GQ:.*]] = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_values, even> experts_from 8 : tensor<8x32x64xf4E2M1FN>
// R1-DAG: %[[GS:.*]] = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_scales, even> experts_from 8 : tensor<8x32x2xf8E8M0FNU>
// R1-DAG: %[[DQ:.*]] = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_values, even> experts_from 8 : tensor<8x64x32xf4E2M1FN>
// R1-DAG: %[[DS:.*]] = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> experts_from 8 : tensor<8x64x1xf8E8M0FNU>
// R1-DAG: %[[G:.*]] = kiln.block_scaled %[[GQ]], %[[GS]] : !kiln.block_scaled<tensor<8x32x64xf4E2M1FN>, tensor<8x32x2xf8E8M0FNU>, [1, 32]>
// R1-DAG: %[[D:.*]] = kiln.block_scaled %[[DQ]], %[[DS]] : !kiln.block_scaled<tensor<8x64x32xf4E2M1FN>, tensor<8x64x1xf8E8M0FNU>, [1, 32]>
// R1: kiln.moe %{{.*}} experts %[[G]], %{{.*}}, %[[D]] top_k 4 groups 1 keep 1 scale 1.000000e+00 block_size 16 local_experts_from 8 :
// R1GONE-LABEL: func.func @block_scaled
// R1GONE-NOT: {{tensor<16x[0-9]+x[0-9]+x|shared_experts}}
// R1GONE: kiln.moe
// The shared expert, block-scaled too, stays whole on rank 0.
// R0: %[[SG:.*]] = kiln.block_scaled %{{.*}}, %{{.*}} : !kiln.block_scaled<tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, [1, 32]>
// R0: kiln.moe %{{.*}} shared %[[SG]], %[[SG]], %{{.*}} top_k 4 {{.*}} local_experts_from 0 :
func.func @block_scaled(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  %gq = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_values, even> : tensor<16x32x64xf4E2M1FN>
  %gs = kiln.weight "l1.experts.{e}.gate" encoding <mxfp4_scales, even> : tensor<16x32x2xf8E8M0FNU>
  %dq = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_values, even> : tensor<16x64x32xf4E2M1FN>
  %ds = kiln.weight "l1.experts.{e}.down" encoding <mxfp4_scales, even> : tensor<16x64x1xf8E8M0FNU>
  %sq = kiln.weight "l1.shared_experts.gate" encoding <mxfp4_values, even> : tensor<32x64xf4E2M1FN>
  %ss = kiln.weight "l1.shared_experts.gate" encoding <mxfp4_scales, even> : tensor<32x2xf8E8M0FNU>
  %sdq = kiln.weight "l1.shared_experts.down" encoding <mxfp4_values, even> : tensor<64x32xf4E2M1FN>
  %sds = kiln.weight "l1.shared_experts.down" encoding <mxfp4_scales, even> : tensor<64x1xf8E8M0FNU>
  %g = kiln.block_scaled %gq, %gs : !kiln.block_scaled<tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>, [1, 32]>
  %d = kiln.block_scaled %dq, %ds : !kiln.block_scaled<tensor<16x64x32xf4E2M1FN>, tensor<16x64x1xf8E8M0FNU>, [1, 32]>
  %sg = kiln.block_scaled %sq, %ss : !kiln.block_scaled<tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, [1, 32]>
  %sd = kiln.block_scaled %sdq, %sds : !kiln.block_scaled<tensor<64x32xf4E2M1FN>, tensor<64x1xf8E8M0FNU>, [1, 32]>
  %y = kiln.moe %x router %r bias %b experts %g, %g, %d shared %sg, %sg, %sd
         top_k 4 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>,
            !kiln.block_scaled<tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<16x64x32xf4E2M1FN>, tensor<16x64x1xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<64x32xf4E2M1FN>, tensor<64x1xf8E8M0FNU>, [1, 32]>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
