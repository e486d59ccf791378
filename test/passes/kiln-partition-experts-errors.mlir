// The pass refuses what it cannot split, naming why.
// RUN: kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=1" -verify-diagnostics
// RUN: not kiln-opt %s -split-input-file -kiln-partition-experts="ranks=2 rank=2" 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: kiln-partition-experts: rank 2 of 2 ranks, expected 0 <= rank < ranks

// Expert weights that are not kiln.weight stacks (function arguments).
func.func @args(%x: tensor<?x64xf32>, %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  // expected-error @below {{an expert operand is not a whole kiln.weight expert stack}}
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d
         top_k 4 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>, tensor<16x32x64xbf16>,
            tensor<16x32x64xbf16>, tensor<16x64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A block-scaled stack that is not a kiln.block_scaled of two kiln.weight
// stacks (a function argument).
func.func @scaled_arg(%x: tensor<?x64xf32>, %g: !kiln.block_scaled<tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>, [1, 32]>, %d: !kiln.block_scaled<tensor<16x64x32xf4E2M1FN>, tensor<16x64x1xf8E8M0FNU>, [1, 32]>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  // expected-error @below {{an expert operand is not a whole kiln.weight expert stack}}
  %y = kiln.moe %x router %r bias %b experts %g, %g, %d
         top_k 4 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>,
            !kiln.block_scaled<tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<16x32x64xf4E2M1FN>, tensor<16x32x2xf8E8M0FNU>, [1, 32]>,
            !kiln.block_scaled<tensor<16x64x32xf4E2M1FN>, tensor<16x64x1xf8E8M0FNU>, [1, 32]>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A MoE whose result is summed over ranks already (kiln-partition-tensor ran
// first).
func.func @after_tensor(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  %g = kiln.weight "l1.experts.{e}.gate" slice [0, 0] : tensor<16x16x64xbf16>
  %u = kiln.weight "l1.experts.{e}.up" slice [0, 0] : tensor<16x16x64xbf16>
  %d = kiln.weight "l1.experts.{e}.down" slice [1, 0] : tensor<16x64x16xbf16>
  // expected-error @below {{the result is already summed over ranks; run this pass before kiln-partition-tensor}}
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d
         top_k 4 groups 1 keep 1 scale 1.0 block_size 16
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>, tensor<16x16x64xbf16>,
            tensor<16x16x64xbf16>, tensor<16x64x16xbf16>) -> tensor<?x64xf32>
  %s = kiln.all_reduce %y group 2 : tensor<?x64xf32>
  return %s : tensor<?x64xf32>
}

// -----

// A module split already.
func.func @twice(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %r = kiln.weight "l1.router" : tensor<16x64xbf16>
  %b = kiln.weight "l1.bias" : tensor<16xf32>
  %g = kiln.weight "l1.experts.{e}.gate" experts_from 8 : tensor<8x32x64xbf16>
  %u = kiln.weight "l1.experts.{e}.up" experts_from 8 : tensor<8x32x64xbf16>
  %d = kiln.weight "l1.experts.{e}.down" experts_from 8 : tensor<8x64x32xbf16>
  // expected-error @below {{kiln-partition-experts: already partitioned}}
  %y = kiln.moe %x router %r bias %b experts %g, %u, %d
         top_k 4 groups 1 keep 1 scale 1.0 block_size 16 local_experts_from 8
         : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>, tensor<8x32x64xbf16>,
            tensor<8x32x64xbf16>, tensor<8x64x32xbf16>) -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}
