// RUN: kiln-opt %s -split-input-file -verify-diagnostics
// One case per verifier message of the kiln dialect.

// expected-error @below {{a raw encoding takes no scale rule, found 'even'}}
%0 = kiln.weight "w" encoding <raw, even> : tensor<4xf32>

// -----

// expected-error @below {{weight name must not be empty}}
%0 = kiln.weight "" : tensor<4xf32>

// -----

// expected-error @below {{weight must have a static shape, found [?, 4]}}
%0 = kiln.weight "w" : tensor<?x4xf32>

// -----

// expected-error @below {{expert-stacked weight 'l.experts.{e}.w' must have rank >= 3, found rank 2}}
%0 = kiln.weight "l.experts.{e}.w" : tensor<4x4xbf16>

// -----

// expected-error @below {{raw weight elements must be bf16, f16, f32, i32, i64, f8E4M3FN, f4E2M1FN or f8E8M0FNU, found 'f64'}}
%0 = kiln.weight "w" : tensor<4xf64>

// -----

// expected-error @below {{'source_scale' needs an mxfp4 encoding, or f32 elements (a dequantized FP8 or MXFP4 source), found a raw 'f8E4M3FN' one}}
%0 = kiln.weight "w" source_scale "s" : tensor<4x4xf8E4M3FN>

// -----

// expected-error @below {{mxfp4_values encoding needs f4E2M1FN elements (or f32, stored dequantized), found 'bf16'}}
%0 = kiln.weight "w" encoding <mxfp4_values, even> : tensor<4x32xbf16>

// -----

// expected-error @below {{mxfp4_scales encoding needs f8E8M0FNU elements, found 'i32'}}
%0 = kiln.weight "w" encoding <mxfp4_scales, even> : tensor<4x1xi32>

// -----

// expected-error @below {{f4E2M1FN weights are stored two per byte and need an even last dimension, found 3}}
%0 = kiln.weight "w" : tensor<4x3xf4E2M1FN>

// -----

func.func @f(%q: tensor<32xf4E2M1FN>, %s: tensor<1xf8E8M0FNU>) {
  // expected-error @below {{values must have rank >= 2, found rank 1}}
  %0 = kiln.dequantize %q, %s block [1, 32] : tensor<32xf4E2M1FN>, tensor<1xf8E8M0FNU> -> tensor<32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xf4E2M1FN>, %s: tensor<4xf8E8M0FNU>) {
  // expected-error @below {{values and scales must have the same rank, found 2 and 1}}
  %0 = kiln.dequantize %q, %s block [1, 32] : tensor<4x32xf4E2M1FN>, tensor<4xf8E8M0FNU> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xf4E2M1FN>, %s: tensor<4x1xf8E8M0FNU>) {
  // expected-error @below {{block must have 2 entries, found 1}}
  %0 = kiln.dequantize %q, %s block [32] : tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xf4E2M1FN>, %s: tensor<4x1xf8E8M0FNU>) {
  // expected-error @below {{block sizes must be positive, found [0, 32]}}
  %0 = kiln.dequantize %q, %s block [0, 32] : tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xf4E2M1FN>, %s: tensor<4x1xf32>) {
  // expected-error @below {{f4E2M1FN values need f8E8M0FNU scales, found 'f32'}}
  %0 = kiln.dequantize %q, %s block [1, 32] : tensor<4x32xf4E2M1FN>, tensor<4x1xf32> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xf4E2M1FN>, %s: tensor<1x1xf8E8M0FNU>) {
  // expected-error @below {{MXFP4 block must be [1, 32], found [4, 32]}}
  %0 = kiln.dequantize %q, %s block [4, 32] : tensor<4x32xf4E2M1FN>, tensor<1x1xf8E8M0FNU> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xf8E4M3FN>, %s: tensor<1x1xbf16>) {
  // expected-error @below {{f8E4M3FN values need f32 scales, found 'bf16'}}
  %0 = kiln.dequantize %q, %s block [128, 128] : tensor<4x32xf8E4M3FN>, tensor<1x1xbf16> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<4x32xbf16>, %s: tensor<1x1xf32>) {
  // expected-error @below {{values must be f4E2M1FN or f8E4M3FN, found 'bf16'}}
  %0 = kiln.dequantize %q, %s block [128, 128] : tensor<4x32xbf16>, tensor<1x1xf32> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%q: tensor<200x300xf8E4M3FN>, %s: tensor<2x2xf32>) {
  // expected-error @below {{scales must have shape [2, 3] (values shape divided by the block, rounded up), found [2, 2]}}
  %0 = kiln.dequantize %q, %s block [128, 128] : tensor<200x300xf8E4M3FN>, tensor<2x2xf32> -> tensor<200x300xf32>
  return
}

// -----

func.func @f(%q: tensor<4x64xf4E2M1FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @below {{result must have shape [4, 64], found [4, 32]}}
  %0 = kiln.dequantize %q, %s block [1, 32] : tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU> -> tensor<4x32xf32>
  return
}

// -----

func.func @f(%t: tensor<16xbf16>, %ids: tensor<?xi32>) {
  // expected-error @below {{table must have rank 2, found rank 1}}
  %0 = kiln.embedding %t[%ids] : tensor<16xbf16>, tensor<?xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%t: tensor<16x8xbf16>, %ids: tensor<?xi32>) {
  // expected-error @below {{result must have shape [?, 8], found [?, 16]}}
  %0 = kiln.embedding %t[%ids] : tensor<16x8xbf16>, tensor<?xi32> -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%x: tensor<?x2x8xf32>, %w: tensor<4x8xbf16>) {
  // expected-error @below {{lhs must have rank 2, found rank 3}}
  %0 = kiln.matmul %x, %w : tensor<?x2x8xf32>, tensor<4x8xbf16> -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %w: tensor<2x4x8xbf16>) {
  // expected-error @below {{the weight must be 2-D [N, K], found rank 3}}
  %0 = kiln.matmul %x, %w : tensor<?x8xf32>, tensor<2x4x8xbf16> -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %w: tensor<4x16xbf16>) {
  // expected-error @below {{contraction mismatch: lhs has K = 8, the weight has K = 16}}
  %0 = kiln.matmul %x, %w : tensor<?x8xf32>, tensor<4x16xbf16> -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %q: tensor<4x64xf4E2M1FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @below {{contraction mismatch: lhs has K = 32, the weight has K = 64}}
  %0 = kiln.mx_matmul %x, %q, %s block [1, 32] : tensor<?x32xf32>, tensor<4x64xf4E2M1FN>, tensor<4x2xf8E8M0FNU> -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %w: tensor<4xbf16>) {
  // expected-error @below {{weight must be 1-D with the input's last dimension [8], found [4]}}
  %0 = kiln.rms_norm %x, %w eps 1.0e-5 : tensor<?x8xf32>, tensor<4xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %w: tensor<8xbf16>, %b: tensor<8x1xbf16>) {
  // expected-error @below {{bias must be 1-D with the input's last dimension [8], found [8, 1]}}
  %0 = kiln.layer_norm %x, %w, %b eps 1.0e-6 : tensor<?x8xf32>, tensor<8xbf16>, tensor<8x1xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x2x2x8xf32>, %p: tensor<?xi32>) {
  // expected-error @below {{input must be [T, D] or [T, heads, D], found rank 4}}
  %0 = kiln.rope %x, %p neox theta 1.0e4 dims[0, 8] : tensor<?x2x2x8xf32>, tensor<?xi32> -> tensor<?x2x2x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %p: tensor<?x1xi32>) {
  // expected-error @below {{positions must have rank 1, found rank 2}}
  %0 = kiln.rope %x, %p neox theta 1.0e4 dims[0, 8] : tensor<?x8xf32>, tensor<?x1xi32> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %p: tensor<?xi32>) {
  // expected-error @below {{rotary_dim must be positive and even, found 3}}
  %0 = kiln.rope %x, %p neox theta 1.0e4 dims[0, 3] : tensor<?x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %p: tensor<?xi32>) {
  // expected-error @below {{rotated dims [4, 12) must lie within the last dimension (8)}}
  %0 = kiln.rope %x, %p interleaved theta 1.0e4 dims[4, 8] : tensor<?x8xf32>, tensor<?xi32> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %y: tensor<?x4xf32>) {
  // expected-error @below {{rhs must have the shape of lhs [?, 8] or be 1-D matching its last dimension, found [?, 4]}}
  %0 = kiln.add %x, %y : tensor<?x8xf32>, tensor<?x4xf32> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %y: tensor<8xf32>) {
  // expected-error @below {{result must have shape [?, 8], found [?, 4]}}
  %0 = kiln.mul %x, %y : tensor<?x8xf32>, tensor<8xf32> -> tensor<?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{result must have shape [?, 8], found [?, 4]}}
  %0 = kiln.cast %x : tensor<?x8xf32> -> tensor<?x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{k must be in [1, 8] (the last dimension), found 9}}
  %0, %1 = kiln.top_k %x k 9 : tensor<?x8xf32> -> tensor<?x9xf32>, tensor<?x9xi32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{indices must have i32 elements, found 'i64'}}
  %0, %1 = kiln.top_k %x k 2 : tensor<?x8xf32> -> tensor<?x2xf32>, tensor<?x2xi64>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{values must have shape [?, 2], found [?, 3]}}
  %0, %1 = kiln.top_k %x k 2 : tensor<?x8xf32> -> tensor<?x3xf32>, tensor<?x2xi32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{n_group must be positive and divide the last dimension (8), found 3}}
  %0 = kiln.group_limit %x groups 3 keep 1 : tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{topk_group must be in [1, 4], found 5}}
  %0 = kiln.group_limit %x groups 4 keep 5 : tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %i: tensor<?xi32>) {
  // expected-error @below {{input and indices must have the same rank, found 2 and 1}}
  %0 = kiln.gather %x[%i] : tensor<?x8xf32>, tensor<?xi32> -> tensor<?xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %i: tensor<3x2xi32>) {
  // expected-error @below {{indices must share the input's leading dims [4], found [3, 2]}}
  %0 = kiln.gather %x[%i] : tensor<4x8xf32>, tensor<3x2xi32> -> tensor<3x2xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{result must have shape [?], found [?, 8]}}
  %0 = kiln.argmax %x : tensor<?x8xf32> -> tensor<?x8xi32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{result must have i32 elements, found 'i64'}}
  %0 = kiln.sample %x : tensor<?x8xf32> -> tensor<?xi64>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{reshape must keep the element type 'f32', found 'bf16'}}
  %0 = kiln.reshape %x : tensor<?x8xf32> -> tensor<?x2x4xbf16>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @below {{reshape must keep the leading (token) dimension: [4, 8] -> [8, 4]}}
  %0 = kiln.reshape %x : tensor<4x8xf32> -> tensor<8x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{reshape must keep the elements per token: 8 vs 6}}
  %0 = kiln.reshape %x : tensor<?x8xf32> -> tensor<?x2x3xf32>
  return
}

// -----

func.func @f() {
  // expected-error @below {{needs at least one input}}
  %0 = "kiln.concat"() {axis = 0 : i64} : () -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{axis must be in [0, 2), found 2}}
  %0 = kiln.concat %x, %x axis 2 : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %y: tensor<?x8xbf16>) {
  // expected-error @below {{inputs must share rank and element type}}
  %0 = kiln.concat %x, %y axis 1 : tensor<?x8xf32>, tensor<?x8xbf16> -> tensor<?x16xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %y: tensor<3x8xf32>) {
  // expected-error @below {{inputs must agree outside the axis, found [4, 8] and [3, 8]}}
  %0 = kiln.concat %x, %y axis 1 : tensor<4x8xf32>, tensor<3x8xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{result must have shape [?, 16], found [?, 12]}}
  %0 = kiln.concat %x, %x axis 1 : tensor<?x8xf32>, tensor<?x8xf32> -> tensor<?x12xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{needs at least one result}}
  "kiln.split"(%x) {axis = 1 : i64} : (tensor<?x8xf32>) -> ()
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{axis must be in [0, 2), found 3}}
  %0, %1 = kiln.split %x axis 3 : tensor<?x8xf32> -> tensor<?x4xf32>, tensor<?x4xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @below {{each result must have shape [4, 4], found [3, 4]}}
  %0, %1 = kiln.split %x axis 1 : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<3x4xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{result sizes along axis 1 add up to 6, expected 8}}
  %0, %1 = kiln.split %x axis 1 : tensor<?x8xf32> -> tensor<?x4xf32>, tensor<?x2xf32>
  return
}

// -----

// expected-error @below {{width must be positive, found 0}}
kiln.kv_cache @c width 0 : bf16

// -----

// expected-error @below {{element type must be a float type, found 'i32'}}
kiln.kv_cache @c width 4 : i32

// -----

func.func @f(%s: tensor<?xi32>, %p: tensor<?xi32>, %v: tensor<?x4xf32>) {
  // expected-error @below {{@missing does not name a kiln.kv_cache}}
  kiln.kv_cache.append @missing[%s, %p] = %v : tensor<?xi32>, tensor<?xi32>, tensor<?x4xf32>
  return
}

// -----

kiln.kv_cache @c width 8 : bf16
func.func @f(%s: tensor<?xi32>, %p: tensor<?xi32>, %v: tensor<?x4xf32>) {
  // expected-error @below {{values must have shape [?, 8], found [?, 4]}}
  kiln.kv_cache.append @c[%s, %p] = %v : tensor<?xi32>, tensor<?xi32>, tensor<?x4xf32>
  return
}

// -----

kiln.kv_cache @c width 4 : bf16
func.func @f(%s: tensor<3xi32>, %p: tensor<4xi32>, %v: tensor<4x4xf32>) {
  // expected-error @below {{seq_ids must have shape [4], found [3]}}
  kiln.kv_cache.append @c[%s, %p] = %v : tensor<3xi32>, tensor<4xi32>, tensor<4x4xf32>
  return
}

// -----

kiln.kv_cache @c width 4 : bf16
func.func @f(%s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{result must have shape [?, 4], found [?, 8]}}
  %0 = kiln.kv_cache.read @c[%s, %p] : tensor<?xi32>, tensor<?xi32> -> tensor<?x8xf32>
  return
}

// -----

kiln.kv_cache @k width 64 : bf16
kiln.kv_cache @v width 64 : bf16
func.func @f(%q: tensor<?x8xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{q must have rank 3, found rank 2}}
  %0 = kiln.gqa_attention %q, @k, @v[%s, %p] scale 0.1 : tensor<?x8xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x16xf32>
  return
}

// -----

kiln.kv_cache @k width 60 : bf16
kiln.kv_cache @v width 64 : bf16
func.func @f(%q: tensor<?x8x16xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{k_cache width 60 must be a multiple of the head dim 16}}
  %0 = kiln.gqa_attention %q, @k, @v[%s, %p] scale 0.1 : tensor<?x8x16xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x16xf32>
  return
}

// -----

kiln.kv_cache @k width 48 : bf16
kiln.kv_cache @v width 48 : bf16
func.func @f(%q: tensor<?x8x16xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{query heads (8) must be a multiple of the KV heads (3)}}
  %0 = kiln.gqa_attention %q, @k, @v[%s, %p] scale 0.1 : tensor<?x8x16xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x16xf32>
  return
}

// -----

kiln.kv_cache @k width 64 : bf16
kiln.kv_cache @v width 32 : bf16
func.func @f(%q: tensor<?x8x16xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{v_cache width must be KV heads x value dim = 64, found 32}}
  %0 = kiln.gqa_attention %q, @k, @v[%s, %p] scale 0.1 : tensor<?x8x16xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x16xf32>
  return
}

// -----

kiln.kv_cache @lat width 80 : bf16
func.func @f(%qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %kvb: tensor<500x64xbf16>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{kv_b must have heads x (nope + v) = 512 rows, found 500}}
  %0 = kiln.mla_attention %qn, %qp, %kvb, @lat[%s, %p] scale 0.1 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<500x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x32xf32>
  return
}

// -----

kiln.kv_cache @lat width 80 : bf16
func.func @f(%qn: tensor<4x8x32xf32>, %qp: tensor<4x8x16xf32>, %kvb: tensor<512x64xbf16>, %s: tensor<4xi32>, %p: tensor<4xi32>, %k: tensor<3x64xi32>) {
  // expected-error @below {{top_k must have one row per token}}
  %0 = kiln.mla_attention %qn, %qp, %kvb, @lat[%s, %p] top_k %k scale 0.1 : tensor<4x8x32xf32>, tensor<4x8x16xf32>, tensor<512x64xbf16>, tensor<4xi32>, tensor<4xi32>, tensor<3x64xi32> -> tensor<4x8x32xf32>
  return
}

// -----

kiln.kv_cache @lat width 80 : bf16
func.func @f(%qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %kvb: tensor<512x64xbf16>, %s: tensor<?xi32>, %p: tensor<?xi32>, %k: tensor<?x64xi64>) {
  // expected-error @below {{top_k must have i32 elements, found 'i64'}}
  %0 = kiln.mla_attention %qn, %qp, %kvb, @lat[%s, %p] top_k %k scale 0.1 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xbf16>, tensor<?xi32>, tensor<?xi32>, tensor<?x64xi64> -> tensor<?x8x32xf32>
  return
}

// -----

kiln.kv_cache @lat width 96 : bf16
func.func @f(%qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %kvb: tensor<512x64xbf16>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{latent cache must be kv_lora_rank + rope dim = 80 wide, found 96}}
  %0 = kiln.mla_attention %qn, %qp, %kvb, @lat[%s, %p] scale 0.1 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xbf16>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x32xf32>
  return
}

// -----

kiln.kv_cache @idx width 32 : bf16
func.func @f(%q: tensor<?x4x32xf32>, %w: tensor<?x4xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{k must be positive, found 0}}
  %0 = kiln.indexer_top_k %q, %w, @idx[%s, %p] k 0 scale 0.1 : tensor<?x4x32xf32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x0xi32>
  return
}

// -----

kiln.kv_cache @idx width 16 : bf16
func.func @f(%q: tensor<?x4x32xf32>, %w: tensor<?x4xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{indexer key cache must be 32 wide (the q head dim), found 16}}
  %0 = kiln.indexer_top_k %q, %w, @idx[%s, %p] k 8 scale 0.1 : tensor<?x4x32xf32>, tensor<?x4xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8xi32>
  return
}

// -----

kiln.kv_cache @idx width 32 : bf16
func.func @f(%q: tensor<?x4x32xf32>, %w: tensor<?x2xf32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{weights must have shape [?, 4], found [?, 2]}}
  %0 = kiln.indexer_top_k %q, %w, @idx[%s, %p] k 8 scale 0.1 : tensor<?x4x32xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8xi32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>, %i: tensor<3x2xi32>, %w: tensor<3x2xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{indices must have one row per token}}
  %0 = kiln.experts %x, %i, %w, %g, %g, %d : tensor<4x8xf32>, tensor<3x2xi32>, tensor<3x2xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16> -> tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>, %w: tensor<?x2xf32>, %g: tensor<6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{gate must be [E, I, H], found [6, 8]}}
  %0 = kiln.experts %x, %i, %w, %g, %g, %d : tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<6x8xbf16>, tensor<6x8xbf16>, tensor<4x8x6xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %i: tensor<?x2xi32>, %w: tensor<?x2xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x6x8xbf16>) {
  // expected-error @below {{down must have shape [4, 8, 6], found [4, 6, 8]}}
  %0 = kiln.experts %x, %i, %w, %g, %g, %d : tensor<?x8xf32>, tensor<?x2xi32>, tensor<?x2xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{top_k must be in [1, 4] (the expert count), found 5}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 5 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{n_group must be positive and divide the expert count (4), found 3}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 3 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{topk_group must be in [1, 2] (n_group), found 3}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 2 keep 3 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{block_size must be in [1, 4096], found 0}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 0 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<3xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{router_bias must have shape [4], found [3]}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<3xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xi32>, %d: tensor<4x8x6xi32>) {
  // expected-error @below {{operand #3 must be float tensor or block-scaled tensor, but got 'tensor<4x6x8xi32>'}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xi32>, tensor<4x6x8xi32>, tensor<4x8x6xi32>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>, %s: tensor<6xbf16>) {
  // expected-error @below {{shared_gate must be [Is, H], found [6]}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d shared %s, %s, %s top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>, tensor<6xbf16>, tensor<6xbf16>, tensor<6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>, %s: tensor<6x8xbf16>) {
  // expected-error @below {{shared_down must have shape [8, 6], found [6, 8]}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d shared %s, %s, %s top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>, tensor<6x8xbf16>, tensor<6x8xbf16>, tensor<6x8xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>, %s: tensor<6x8xbf16>) {
  // expected-error @below {{the shared expert takes 3 operands (gate, up, down), found 2}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d shared %s, %s top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>, tensor<6x8xbf16>, tensor<6x8xbf16>) -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x32xf32>, %rw: tensor<4x32xbf16>, %rb: tensor<4xf32>, %g: !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>, %u: tensor<4x6x32xbf16>, %d: !kiln.block_scaled<tensor<4x32x6xf4E2M1FN>, tensor<4x32x1xf8E8M0FNU>, [1, 32]>) {
  // expected-error @below {{gate, up and down must be all float tensors or all block-scaled with one block, found '!kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>', 'tensor<4x6x32xbf16>' and '!kiln.block_scaled<tensor<4x32x6xf4E2M1FN>, tensor<4x32x1xf8E8M0FNU>, [1, 32]>'}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %u, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x32xf32>, tensor<4x32xbf16>, tensor<4xf32>, !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>, tensor<4x6x32xbf16>, !kiln.block_scaled<tensor<4x32x6xf4E2M1FN>, tensor<4x32x1xf8E8M0FNU>, [1, 32]>) -> tensor<?x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x256xf32>, %rw: tensor<4x256xbf16>, %rb: tensor<4xf32>, %g: tensor<4x256x256xbf16>, %sq: !kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>, %sd: !kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x8xf32>, [128, 32]>) {
  // expected-error @below {{shared_gate, shared_up and shared_down must be all float tensors or all block-scaled with one block, found '!kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>', '!kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>' and '!kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x8xf32>, [128, 32]>'}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %g shared %sq, %sq, %sd top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x256xf32>, tensor<4x256xbf16>, tensor<4xf32>, tensor<4x256x256xbf16>, tensor<4x256x256xbf16>, tensor<4x256x256xbf16>, !kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>, !kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>, !kiln.block_scaled<tensor<256x256xf8E4M3FN>, tensor<2x8xf32>, [128, 32]>) -> tensor<?x256xf32>
  return
}

// -----

// A block-scaled stack's shape is its values'.
func.func @f(%x: tensor<?x32xf32>, %rw: tensor<4x32xbf16>, %rb: tensor<4xf32>, %g: !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>, %d: !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>) {
  // expected-error @below {{down must have shape [4, 32, 6], found [4, 6, 32]}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 8 : (tensor<?x32xf32>, tensor<4x32xbf16>, tensor<4xf32>, !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>, !kiln.block_scaled<tensor<4x6x32xf4E2M1FN>, tensor<4x6x1xf8E8M0FNU>, [1, 32]>) -> tensor<?x32xf32>
  return
}

// -----

// !kiln.block_scaled checks its parts where the type is written.
// expected-error @below {{values must have rank >= 2, found rank 1}}
func.func @f(%v: !kiln.block_scaled<tensor<32xf4E2M1FN>, tensor<1xf8E8M0FNU>, [1, 32]>) {
  return
}

// -----

// expected-error @below {{values and scales must have the same rank, found 2 and 1}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4xf8E8M0FNU>, [1, 32]>) {
  return
}

// -----

// expected-error @below {{block must have 2 entries, found 1}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU>, [32]>) {
  return
}

// -----

// expected-error @below {{block sizes must be positive, found [0, 32]}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU>, [0, 32]>) {
  return
}

// -----

// expected-error @below {{f4E2M1FN values need f8E8M0FNU scales, found 'f32'}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf32>, [1, 32]>) {
  return
}

// -----

// expected-error @below {{MXFP4 block must be [1, 32], found [4, 32]}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<1x1xf8E8M0FNU>, [4, 32]>) {
  return
}

// -----

// expected-error @below {{f8E4M3FN values need f32 scales, found 'bf16'}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xf8E4M3FN>, tensor<1x1xbf16>, [128, 128]>) {
  return
}

// -----

// expected-error @below {{values must be f4E2M1FN or f8E4M3FN, found 'bf16'}}
func.func @f(%v: !kiln.block_scaled<tensor<4x32xbf16>, tensor<1x1xf32>, [128, 128]>) {
  return
}

// -----

// expected-error @below {{scales must have shape [2, 3] (values shape divided by the block, rounded up), found [2, 2]}}
func.func @f(%v: !kiln.block_scaled<tensor<200x300xf8E4M3FN>, tensor<2x2xf32>, [128, 128]>) {
  return
}

// -----

func.func @f(%q: tensor<4x64xf4E2M1FN>, %s: tensor<4x1xf8E8M0FNU>) {
  // expected-error @below {{failed to verify that values have the type the result names}}
  %0 = "kiln.block_scaled"(%q, %s) : (tensor<4x64xf4E2M1FN>, tensor<4x1xf8E8M0FNU>) -> !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU>, [1, 32]>
  return
}

// -----

func.func @f(%q: tensor<4x32xf4E2M1FN>, %s: tensor<4x2xf8E8M0FNU>) {
  // expected-error @below {{failed to verify that scales have the type the result names}}
  %0 = "kiln.block_scaled"(%q, %s) : (tensor<4x32xf4E2M1FN>, tensor<4x2xf8E8M0FNU>) -> !kiln.block_scaled<tensor<4x32xf4E2M1FN>, tensor<4x1xf8E8M0FNU>, [1, 32]>
  return
}

// -----

func.func @f(%x: tensor<f32>, %r: tensor<?xi32>) {
  // expected-error @below {{input must have a leading row dimension}}
  %0 = kiln.take_rows %x[%r] : tensor<f32>, tensor<?xi32> -> tensor<f32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %r: tensor<?x1xi32>) {
  // expected-error @below {{rows must have rank 1, found rank 2}}
  %0 = kiln.take_rows %x[%r] : tensor<?x8xf32>, tensor<?x1xi32> -> tensor<?x8xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %r: tensor<3xi32>) {
  // expected-error @below {{result must have shape [3, 8], found [3, 4]}}
  %0 = kiln.take_rows %x[%r] : tensor<?x8xf32>, tensor<3xi32> -> tensor<3x4xf32>
  return
}

// -----

kiln.kv_cache @lat width 80 : bf16
func.func @f(%qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %kvb: tensor<512x64xf4E2M1FN>, %kvs: tensor<512x2xf8E8M0FNU>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{kv_b_scales need the 'block' attribute}}
  %0 = "kiln.mla_attention"(%qn, %qp, %kvb, %kvs, %s, %p) {cache = @lat, scale = 0.1 : f32, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1, 1, 0>} : (tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xf4E2M1FN>, tensor<512x2xf8E8M0FNU>, tensor<?xi32>, tensor<?xi32>) -> tensor<?x8x32xf32>
  return
}

// -----

kiln.kv_cache @lat width 80 : bf16
func.func @f(%qn: tensor<?x8x32xf32>, %qp: tensor<?x8x16xf32>, %kvb: tensor<512x64xi32>, %s: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{unscaled kv_b must be float, found 'i32'}}
  %0 = kiln.mla_attention %qn, %qp, %kvb, @lat[%s, %p] scale 0.1 : tensor<?x8x32xf32>, tensor<?x8x16xf32>, tensor<512x64xi32>, tensor<?xi32>, tensor<?xi32> -> tensor<?x8x32xf32>
  return
}

// -----

func.func @f(%x: tensor<?x8xbf16>) {
  // expected-error @below {{operand #0 must be ranked tensor of 32-bit float values}}
  %0 = kiln.all_reduce %x : tensor<?x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>) {
  // expected-error @below {{requires the same type for all operands and results}}
  %0 = "kiln.all_reduce"(%x) : (tensor<?x8xf32>) -> tensor<?x4xf32>
  return
}

// -----

func.func @f() {
  // expected-error @below {{'experts_from' needs an expert stack ({e} in the name), found 'l0.w'}}
  %0 = kiln.weight "l0.w" experts_from 2 : tensor<4x8xbf16>
  return
}

// -----

func.func @f() {
  // expected-error @below {{attribute 'first_expert' failed to satisfy constraint}}
  %0 = "kiln.weight"() {name = "l0.experts.{e}.w", encoding = #kiln.encoding<raw>, first_expert = -1 : i64} : () -> tensor<4x8x8xbf16>
  return
}

// -----

func.func @f(%x: tensor<?x8xf32>, %rw: tensor<4x8xbf16>, %rb: tensor<4xf32>, %g: tensor<4x6x8xbf16>, %d: tensor<4x8x6xbf16>) {
  // expected-error @below {{local experts [2, 6) must lie inside the 4 the router chooses from}}
  %0 = kiln.moe %x router %rw bias %rb experts %g, %g, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 8 local_experts_from 2 : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x6x8xbf16>, tensor<4x6x8xbf16>, tensor<4x8x6xbf16>) -> tensor<?x8xf32>
  return
}

// -----

// expected-error @below {{'slice' must be [axis, first] with axis 0 (rows) or 1 (columns) and first >= 0}}
%0 = kiln.weight "w" slice [2, 0] : tensor<4x8xbf16>

// -----

// expected-error @below {{'slice' must be [axis, first] with axis 0 (rows) or 1 (columns) and first >= 0}}
%0 = kiln.weight "w" slice [0, -4] : tensor<4x8xbf16>

// -----

// expected-error @below {{'slice' needs a matrix (or a stack of them) or a vector (axis 0), found rank 1 with axis 1}}
%0 = kiln.weight "w" slice [1, 4] : tensor<4xbf16>

// -----

func.func @negative_group(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @below {{attribute 'group' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = kiln.all_reduce %x group -1 : tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @static_rows(%x: tensor<4x8xf32>) -> tensor<?x8xf32> {
  // expected-error @below {{exchanges whole rows: expected a leading dynamic (token) dimension on input and result, found [4, 8] -> [?, 8]}}
  %0 = kiln.all_gather_rows %x : tensor<4x8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @other_rows(%x: tensor<?x8xf32>) -> tensor<?x4xf32> {
  // expected-error @below {{result rows [4] differ from input rows [8]}}
  %0 = kiln.reduce_scatter_rows %x : tensor<?x8xf32> -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

func.func @bf16_rows(%x: tensor<?x8xbf16>) -> tensor<?x8xbf16> {
  // expected-error @below {{operand #0 must be ranked tensor of 32-bit float values}}
  %0 = kiln.all_gather_rows %x : tensor<?x8xbf16> -> tensor<?x8xbf16>
  return %0 : tensor<?x8xbf16>
}

// -----

func.func @zero_group(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {
  // expected-error @below {{attribute 'group' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = kiln.all_gather_rows %x group 0 : tensor<?x8xf32> -> tensor<?x8xf32>
  return %0 : tensor<?x8xf32>
}

// -----

func.func @uneven_ranks(%x: tensor<?x8xf32>, %r: tensor<16x8xbf16>, %b: tensor<16xf32>) {
  // expected-error @below {{experts_per_rank 5 does not divide the router's 16 experts}}
  %a, %t = kiln.dispatch_rows %x router %r bias %b top_k 2 groups 1 keep 1 experts_per_rank 5 : (tensor<?x8xf32>, tensor<16x8xbf16>, tensor<16xf32>) -> (tensor<?x8xf32>, tensor<?x1xi32>)
  return
}

// -----

func.func @route_words(%x: tensor<?x8xf32>, %r: tensor<64x8xbf16>, %b: tensor<64xf32>) {
  // expected-error @below {{routes must be [?, 2] (a bit for each of 64 ranks), found [?, 1]}}
  %a, %t = kiln.dispatch_rows %x router %r bias %b top_k 2 groups 1 keep 1 experts_per_rank 1 : (tensor<?x8xf32>, tensor<64x8xbf16>, tensor<64xf32>) -> (tensor<?x8xf32>, tensor<?x1xi32>)
  return
}

// -----

func.func @dispatch_router(%x: tensor<?x8xf32>, %r: tensor<16x4xbf16>, %b: tensor<16xf32>) {
  // expected-error @below {{router}}
  %a, %t = kiln.dispatch_rows %x router %r bias %b top_k 2 groups 1 keep 1 experts_per_rank 8 : (tensor<?x8xf32>, tensor<16x4xbf16>, tensor<16xf32>) -> (tensor<?x8xf32>, tensor<?x1xi32>)
  return
}

// -----

func.func @combine_foreign_routes(%p: tensor<?x8xf32>, %t: tensor<?x1xi32>) -> tensor<?x8xf32> {
  // expected-error @below {{routes must be the routes of a kiln.dispatch_rows}}
  %y = kiln.combine_rows %p routes %t : (tensor<?x8xf32>, tensor<?x1xi32>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}

// -----

func.func @shared_own_rows_without_dispatch(%x: tensor<?x8xf32>, %r: tensor<4x8xbf16>, %b: tensor<4xf32>, %g: tensor<4x16x8xbf16>, %d: tensor<4x8x16xbf16>) -> tensor<?x8xf32> {
  // expected-error @below {{shared_own_rows reads the own rows a kiln.dispatch_rows puts first; the input is not one's rows}}
  %y = kiln.moe %x router %r bias %b experts %g, %g, %d top_k 2 groups 1 keep 1 scale 1.0 block_size 16 shared_own_rows : (tensor<?x8xf32>, tensor<4x8xbf16>, tensor<4xf32>, tensor<4x16x8xbf16>, tensor<4x16x8xbf16>, tensor<4x8x16xbf16>) -> tensor<?x8xf32>
  return %y : tensor<?x8xf32>
}
