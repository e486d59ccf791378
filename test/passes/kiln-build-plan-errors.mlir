// RUN: kiln-opt %s -split-input-file -kiln-build-plan -verify-diagnostics
// One case per error of kiln-build-plan.

// expected-error @below {{the module has no @decode entry point}}
module {
  func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
    return %ids : tensor<?xi32>
  }
}

// -----

func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  %t = kiln.weight "embed" : tensor<16x8xf32>
  %h = kiln.embedding %t[%ids] : tensor<16x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
  // expected-error @below {{no CPU kernel lowers this op (is the module fused? run the kiln-fuse-graph pipeline first)}}
  %s = kiln.sample %h : tensor<?x8xf32> -> tensor<?xi32>
  return %s : tensor<?xi32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?x8xf32> {
  %v = kiln.weight "embed" encoding <mxfp4_values, even> : tensor<16x8xf4E2M1FN>
  // expected-error @below {{weight 'embed' is not a plain float tensor; quantized weights must come with their scales}}
  %h = kiln.embedding %v[%ids] : tensor<16x8xf4E2M1FN>, tensor<?xi32> -> tensor<?x8xf32>
  return %h : tensor<?x8xf32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?x256xf32> {
  %t = kiln.weight "embed" : tensor<16x256xf32>
  %h = kiln.embedding %t[%ids] : tensor<16x256xf32>, tensor<?xi32> -> tensor<?x256xf32>
  %v = kiln.weight "proj" : tensor<256x256xf8E4M3FN>
  %s = kiln.weight "proj_scale_inv" : tensor<4x4xf32>
  // expected-error @below {{FP8 weights need 128x128 blocks}}
  %y = kiln.mx_matmul %h, %v, %s block [64, 64] : tensor<?x256xf32>, tensor<256x256xf8E4M3FN>, tensor<4x4xf32> -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?x256xf32> {
  %t = kiln.weight "embed" : tensor<16x256xf32>
  %h = kiln.embedding %t[%ids] : tensor<16x256xf32>, tensor<?xi32> -> tensor<?x256xf32>
  %v = kiln.weight "proj" slice [1, 128] : tensor<256x128xf4E2M1FN>
  %s = kiln.weight "proj_scale" slice [1, 2] : tensor<256x4xf8E8M0FNU>
  %hh:2 = kiln.split %h axis 1 : tensor<?x256xf32> -> tensor<?x128xf32>, tensor<?x128xf32>
  // expected-error @below {{weight 'proj' and its scales are not sliced alike (values slice [1, 128], scales [1, 2] with blocks of 32)}}
  %y = kiln.mx_matmul %hh#1, %v, %s block [1, 32] : tensor<?x128xf32>, tensor<256x128xf4E2M1FN>, tensor<256x4xf8E8M0FNU> -> tensor<?x256xf32>
  return %y : tensor<?x256xf32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}

// -----

// expected-error @below {{argument #4 of @prefill must be a ranked tensor (a buffer), found '!kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU>, [1, 32]>'}}
func.func @prefill(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>, %w: !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU>, [1, 32]>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}
func.func @decode(%ids: tensor<?xi32>, %seq: tensor<?xi32>, %pos: tensor<?xi32>, %rows: tensor<?xi32>) -> tensor<?xi32> {
  return %ids : tensor<?xi32>
}
