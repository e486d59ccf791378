// RUN: kiln-opt %s -split-input-file -kiln-check-fused -verify-diagnostics

func.func @unfused(%x: tensor<?x64xf32>, %i: tensor<?x1xi32>, %w: tensor<?x1xf32>,
    %g: tensor<16x32x64xbf16>, %u: tensor<16x32x64xbf16>, %d: tensor<16x64x32xbf16>) -> tensor<?x64xf32> {
  // expected-error @below {{unfused MoE}}
  %y = kiln.experts %x, %i, %w, %g, %u, %d : tensor<?x64xf32>, tensor<?x1xi32>, tensor<?x1xf32>, tensor<16x32x64xbf16>, tensor<16x32x64xbf16>, tensor<16x64x32xbf16> -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

func.func @leftover(%q: tensor<32x64xf4E2M1FN>, %s: tensor<32x2xf8E8M0FNU>) -> tensor<32x64xf32> {
  // expected-error @below {{kiln.dequantize left in the program}}
  %w = kiln.dequantize %q, %s block [1, 32] : tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<32x64xf32>
  return %w : tensor<32x64xf32>
}

// -----

// A fused program passes.
func.func @fused(%x: tensor<?x64xf32>, %q: tensor<32x64xf4E2M1FN>, %s: tensor<32x2xf8E8M0FNU>) -> tensor<?x32xf32> {
  %y = kiln.mx_matmul %x, %q, %s block [1, 32] : tensor<?x64xf32>, tensor<32x64xf4E2M1FN>, tensor<32x2xf8E8M0FNU> -> tensor<?x32xf32>
  return %y : tensor<?x32xf32>
}
