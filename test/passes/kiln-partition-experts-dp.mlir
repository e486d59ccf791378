// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=0 dp-attention=true" | FileCheck %s --check-prefix=R0
// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=1 dp-attention=true" | FileCheck %s --check-prefix=R1
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=1 dp-attention=true" | kiln-opt -verify-diagnostics | FileCheck %s --check-prefix=R1
// Groups of 2 ranks sharing their requests (--tp 2 beside it).
// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=1 dp-attention=true dp-group=2" | FileCheck %s --check-prefix=G2
// RUN: not kiln-opt %s -kiln-partition-experts="ranks=2 rank=1 dp-attention=true dp-group=0" 2>&1 | FileCheck %s --check-prefix=G0
// One rank: nothing to gather.
// RUN: kiln-opt %s -kiln-partition-experts="ranks=1 rank=0 dp-attention=true" | FileCheck %s --check-prefix=ONE

// Data-parallel attention: the rows of every rank go into the MoE, and
// each rank keeps its own rows of the sum; the rest of the layer (here the
// residual add) runs on this rank's rows only.
// R0-LABEL: func.func @moe
// R0: %[[A:.*]] = kiln.all_gather_rows %arg0 : tensor<?x64xf32> -> tensor<?x64xf32>
// R0: %[[P:.*]] = kiln.moe %[[A]] router %{{.*}} experts %{{.*}}, %{{.*}}, %{{.*}} shared %{{.*}} local_experts_from 0 :
// R0: %[[S:.*]] = kiln.reduce_scatter_rows %[[P]] : tensor<?x64xf32> -> tensor<?x64xf32>
// R0-NOT: kiln.all_reduce
// R0: kiln.add %arg0, %[[S]]
// R1-LABEL: func.func @moe
// R1: %[[A:.*]] = kiln.all_gather_rows %arg0
// R1: %[[P:.*]] = kiln.moe %[[A]] router {{.*}} local_experts_from 8 :
// R1: %[[S:.*]] = kiln.reduce_scatter_rows %[[P]]
// R1: kiln.add %arg0, %[[S]]
// G2: kiln.all_gather_rows %arg0 group 2
// G2: kiln.reduce_scatter_rows %{{.*}} group 2
// G0: kiln-partition-experts: dp-group 0, expected >= 1
// ONE-LABEL: func.func @moe
// ONE-NOT: all_gather_rows
// ONE-NOT: reduce_scatter_rows
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
