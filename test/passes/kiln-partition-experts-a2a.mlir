// The all-to-all exchange (kiln-compile --moe-exchange all-to-all).
// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=0 dp-attention=true exchange=all-to-all" | FileCheck %s --check-prefix=R0
// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=1 dp-attention=true exchange=all-to-all" | FileCheck %s --check-prefix=R1
// The result round-trips through the parser and verifier.
// RUN: kiln-opt %s -kiln-partition-experts="ranks=2 rank=1 dp-attention=true exchange=all-to-all" | kiln-opt | FileCheck %s --check-prefix=R1
// What it needs, by name.
// RUN: not kiln-opt %s -kiln-partition-experts="ranks=2 rank=0 exchange=all-to-all" 2>&1 | FileCheck %s --check-prefix=NODP
// RUN: not kiln-opt %s -kiln-partition-experts="ranks=2 rank=0 dp-attention=true dp-group=2 exchange=all-to-all" 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not kiln-opt %s -kiln-partition-experts="ranks=2 rank=0 dp-attention=true exchange=broadcast" 2>&1 | FileCheck %s --check-prefix=BAD

// Each rank routes its own rows and sends each to the ranks holding one of
// its experts (8 a rank here), its own rows first (it runs their shared
// expert, which every rank now holds); the parts come back and are added in
// rank order.
// R0-LABEL: func.func @moe
// R0: %[[A:.*]], %[[T:.*]] = kiln.dispatch_rows %arg0 router %[[R:.*]] bias %[[B:.*]] top_k 4 groups 1 keep 1 experts_per_rank 8 own_rows : (tensor<?x64xf32>, tensor<16x64xbf16>, tensor<16xf32>) -> (tensor<?x64xf32>, tensor<?x1xi32>)
// R0: %[[P:.*]] = kiln.moe %[[A]] router %[[R]] bias %[[B]] experts %{{.*}}, %{{.*}}, %{{.*}} shared %{{.*}}, %{{.*}}, %{{.*}} {{.*}} local_experts_from 0 shared_own_rows :
// R0: %[[S:.*]] = kiln.combine_rows %[[P]] routes %[[T]] : (tensor<?x64xf32>, tensor<?x1xi32>) -> tensor<?x64xf32>
// R0-NOT: kiln.all_gather_rows
// R0-NOT: kiln.reduce_scatter_rows
// R0: kiln.add %arg0, %[[S]]
// R1-LABEL: func.func @moe
// R1: kiln.weight "l1.shared_experts.gate" : tensor<32x64xbf16>
// R1: %[[A:.*]], %[[T:.*]] = kiln.dispatch_rows %arg0 {{.*}} experts_per_rank 8 own_rows
// R1: %[[P:.*]] = kiln.moe %[[A]] {{.*}} shared {{.*}} local_experts_from 8 shared_own_rows :
// R1: kiln.combine_rows %[[P]] routes %[[T]]
// NODP: kiln-partition-experts: exchange all-to-all sends each rank's own rows, so it needs dp-attention with dp-group 1 (no tensor parallelism beside it), found no dp-attention
// GROUP: kiln-partition-experts: exchange all-to-all sends each rank's own rows, so it needs dp-attention with dp-group 1 (no tensor parallelism beside it), found dp-group 2
// BAD: kiln-partition-experts: exchange 'broadcast', expected gather or all-to-all
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
