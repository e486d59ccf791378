// RUN: kiln-opt %s -kiln-reuse-buffers | FileCheck %s
// The result round-trips and verifies (no dispatch writes a buffer one of
// its inputs occupies, which matmul's and silu's declarations would refuse
// where they cannot work in place).
// RUN: kiln-opt %s -kiln-reuse-buffers | kiln-opt | FileCheck %s

kiln_plan.weight @w0 dense "embed" bf16 shape [16, 8]
kiln_plan.weight @w1 dense "proj" bf16 shape [8, 8]

// CHECK-LABEL: kiln_plan.plan @decode
// Inputs are never shared.
// CHECK: %[[IDS:.*]] = kiln_plan.buffer tokens "token_ids" input row [] i32
// CHECK: %[[ROWS:.*]] = kiln_plan.buffer selected "logit_rows" input row [] i32
// Three [8] buffers remain of six, renamed by position; the outputs are
// named logits and hidden.
// CHECK-NEXT: %[[A:.*]] = kiln_plan.buffer tokens "t4" row [8] f32
// CHECK-NEXT: %[[B:.*]] = kiln_plan.buffer tokens "t5" row [8] f32
// A different row shape is never shared with [8].
// CHECK-NEXT: %[[E:.*]] = kiln_plan.buffer tokens "hidden" row [2, 4] f32
// CHECK-NEXT: %[[C:.*]] = kiln_plan.buffer tokens "t7" row [8] f32
// CHECK-NEXT: %[[S:.*]] = kiln_plan.buffer selected "logits" row [8] f32
// CHECK-NEXT: kiln_plan.dispatch embedding(%[[IDS]], @w0, %[[A]])
// CHECK-NEXT: kiln_plan.dispatch matmul(%[[A]], @w1, %[[B]])
// %c takes %a, free since the last dispatch read it.
// CHECK-NEXT: kiln_plan.dispatch matmul(%[[B]], @w1, %[[A]])
// %d takes %b, the most recently freed.
// CHECK-NEXT: kiln_plan.dispatch matmul(%[[A]], @w1, %[[B]])
// CHECK-NEXT: kiln_plan.dispatch silu(%[[B]], %[[E]])
// %c (in A) is still read by the add, so %f cannot take it: it is new.
// CHECK-NEXT: kiln_plan.dispatch matmul(%[[B]], @w1, %[[C]])
// %g takes %d's buffer, free after the matmul before.
// CHECK-NEXT: kiln_plan.dispatch add(%[[C]], %[[A]], %[[B]])
// CHECK-NEXT: kiln_plan.dispatch take_rows(%[[B]], %[[ROWS]], %[[S]])
// CHECK-NEXT: kiln_plan.return %[[S]], %[[E]]
kiln_plan.plan @decode {
  %ids = kiln_plan.buffer tokens "token_ids" input row [] i32
  %seq = kiln_plan.buffer tokens "seq_ids" input row [] i32
  %pos = kiln_plan.buffer tokens "positions" input row [] i32
  %rows = kiln_plan.buffer selected "logit_rows" input row [] i32
  %a = kiln_plan.buffer tokens "a" row [8] f32
  %b = kiln_plan.buffer tokens "b" row [8] f32
  %c = kiln_plan.buffer tokens "c" row [8] f32
  %d = kiln_plan.buffer tokens "d" row [8] f32
  %e = kiln_plan.buffer tokens "e" row [2, 4] f32
  %f = kiln_plan.buffer tokens "f" row [8] f32
  %g = kiln_plan.buffer tokens "g" row [8] f32
  %s = kiln_plan.buffer selected "s" row [8] f32
  kiln_plan.dispatch embedding(%ids, @w0, %a)
  kiln_plan.dispatch matmul(%a, @w1, %b)
  kiln_plan.dispatch matmul(%b, @w1, %c)
  kiln_plan.dispatch matmul(%c, @w1, %d)
  kiln_plan.dispatch silu(%d, %e)
  kiln_plan.dispatch matmul(%d, @w1, %f)
  kiln_plan.dispatch add(%f, %c, %g)
  kiln_plan.dispatch take_rows(%g, %rows, %s)
  kiln_plan.return %s, %e
}
