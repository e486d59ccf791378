#!/usr/bin/env python3
"""Writes damaged copies of an artifact: usage damage_artifact.py SRC OUTDIR.

truncated.kiln    cut 5000 bytes short
meta-flip.kiln    one byte of the FlatBuffers metadata flipped
weight-flip.kiln  one byte of the first weight segment (offset 4096) flipped
version.kiln      format version 7 in the header (CRC left stale on purpose)
"""
import os
import struct
import sys

src, out = sys.argv[1], sys.argv[2]
data = bytearray(open(src, "rb").read())


def write(name, blob):
    with open(os.path.join(out, name), "wb") as f:
        f.write(blob)


write("truncated.kiln", data[:-5000])
meta_offset = struct.unpack_from("<Q", data, 48)[0]
meta = bytearray(data)
meta[meta_offset + 200] ^= 0x40
write("meta-flip.kiln", meta)
weight = bytearray(data)
weight[4096 + 17] ^= 0x01
write("weight-flip.kiln", weight)
version = bytearray(data)
struct.pack_into("<I", version, 8, 7)
write("version.kiln", version)
