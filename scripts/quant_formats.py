"""Number formats of GLM checkpoints: BF16, block FP8 (E4M3 + F32 scale per 128x128) and MXFP4 (E2M1 + E8M0 per 32).

Encoders reproduce the glm5-tiny-dev-fp8 / -mxfp4 fixtures byte for byte (checked by
scripts/compare_checkpoint_layout.py --values --requantize against fixtures/glm5-tiny-dev):
  FP8    weight_scale_inv = block amax / 448 (a multiplier), codes = RNE(w / scale) saturating at +-448.
  MXFP4  Quark "even" scale: amax rounded to E2M1 precision ((bits + 0x200000) & 0x7F800000), floor(log2) - 2,
         clamped to [-127, 127]; elements round to nearest with ties to the even code, saturating at 6;
         two codes per byte, element 2i in the low nibble.
Neither encoder writes a negative zero (the fixtures do not). Requires only numpy.
"""

import numpy as np

FP8_MAX = 448.0
FP8_BLOCK = 128
MX_GROUP = 32
E2M1_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], np.float32)
E2M1_MIDPOINTS = (E2M1_VALUES[1:] + E2M1_VALUES[:-1]) / 2


def f32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even. Inputs are finite."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))
    return (rounded >> np.uint32(16)).astype(np.uint16)


def bf16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    """The float32 value of x rounded to bfloat16."""
    return bf16_bits_to_f32(f32_to_bf16_bits(x))


def f32_to_e4m3(x: np.ndarray) -> np.ndarray:
    """float32 -> OCP E4M3FN bytes: nearest even, saturating at +-448, no negative zero."""
    mag = np.minimum(np.abs(x), np.float32(FP8_MAX)).astype(np.float32)
    bits = mag.view(np.uint32)
    # Normal range: keep 3 of the 23 mantissa bits (RNE; a carry bumps the exponent), rebias 127 -> 7.
    kept = (bits + np.uint32(0x7FFFF) + ((bits >> np.uint32(20)) & np.uint32(1))) >> np.uint32(20)
    normal = kept.astype(np.int32) - (120 << 3)
    subnormal = np.rint(mag * np.float32(512.0)).astype(np.int32)  # m * 2^-9, m = 0..8
    code = np.where(mag < np.float32(2.0 ** -6), subnormal, normal).astype(np.uint8)
    return code | np.where(np.signbit(x) & (code != 0), np.uint8(0x80), np.uint8(0))


def e4m3_table() -> np.ndarray:
    """float32 value of each of the 256 E4M3FN codes (0x7F and 0xFF are NaN)."""
    codes = np.arange(256)
    exp, man = (codes >> 3) & 15, codes & 7
    mag = np.where(exp == 0, man * 2.0 ** -9, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    mag[(codes & 0x7F) == 0x7F] = np.nan
    return np.where(codes & 0x80, -mag, mag).astype(np.float32)


def fp8_block_scales(w: np.ndarray) -> np.ndarray:
    """weight_scale_inv [ceil(rows/128), ceil(cols/128)] = block amax / 448, float32."""
    rows, cols = w.shape
    br, bc = -(-rows // FP8_BLOCK), -(-cols // FP8_BLOCK)
    padded = np.zeros((br * FP8_BLOCK, bc * FP8_BLOCK), np.float32)
    padded[:rows, :cols] = np.abs(w)
    amax = padded.reshape(br, FP8_BLOCK, bc, FP8_BLOCK).max(axis=(1, 3))
    return (amax / np.float32(FP8_MAX)).astype(np.float32)


def fp8_block_quantize(w: np.ndarray, scale_inv: np.ndarray) -> np.ndarray:
    """E4M3 codes of w / scale_inv (per 128x128 block); w rows start at a block boundary."""
    safe = np.where(scale_inv == 0, np.float32(1), scale_inv).astype(np.float32)
    full = np.repeat(np.repeat(safe, FP8_BLOCK, axis=0), FP8_BLOCK, axis=1)
    return f32_to_e4m3(w / full[: w.shape[0], : w.shape[1]])


def fp8_dequantize(codes: np.ndarray, scale_inv: np.ndarray) -> np.ndarray:
    full = np.repeat(np.repeat(scale_inv, FP8_BLOCK, axis=0), FP8_BLOCK, axis=1)
    return e4m3_table()[codes] * full[: codes.shape[0], : codes.shape[1]]


def mxfp4_scale_exponents(w: np.ndarray) -> np.ndarray:
    """Quark "even" shared exponent per 32 elements: amax rounded to E2M1 precision, floor(log2) - 2."""
    amax = np.abs(w.reshape(w.shape[0], -1, MX_GROUP)).max(axis=-1).astype(np.float32)
    rounded = (amax.view(np.uint32) + np.uint32(0x200000)) & np.uint32(0x7F800000)
    exponent = (rounded >> np.uint32(23)).astype(np.int32) - 127
    return np.clip(exponent - 2, -127, 127)


def f32_to_e2m1(v: np.ndarray) -> np.ndarray:
    """Nearest E2M1 code (ties to even code), saturating at 6; sign bit 3, no negative zero."""
    mag = np.abs(v)
    hi = np.searchsorted(E2M1_MIDPOINTS, mag, side="right")
    lo = np.searchsorted(E2M1_MIDPOINTS, mag, side="left")
    code = np.where(hi != lo, hi - (hi & 1), hi).astype(np.uint8)
    return code | np.where(np.signbit(v) & (code != 0), np.uint8(8), np.uint8(0))


def mxfp4_quantize(w: np.ndarray):
    """w float32 [rows, K] -> (packed uint8 [rows, K/2], E8M0 scales uint8 [rows, K/32])."""
    rows, cols = w.shape
    exps = mxfp4_scale_exponents(w)
    unit = np.ldexp(np.float32(1), exps).astype(np.float32)
    codes = f32_to_e2m1(w.reshape(rows, -1, MX_GROUP) / unit[..., None]).reshape(rows, cols)
    packed = codes[:, 0::2] | (codes[:, 1::2] << np.uint8(4))
    return packed, (exps + 127).astype(np.uint8)


def mxfp4_dequantize(packed: np.ndarray, scales: np.ndarray) -> np.ndarray:
    table = np.concatenate([E2M1_VALUES, -E2M1_VALUES])
    rows = packed.shape[0]
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(rows, -1)
    unit = np.ldexp(np.float32(1), scales.astype(np.int32) - 127).astype(np.float32)
    return (table[codes].reshape(rows, -1, MX_GROUP) * unit[..., None]).reshape(rows, -1)
