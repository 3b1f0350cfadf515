#!/usr/bin/env python3
"""Writes a deterministic 320x240 RGB test PNG (gradients and a disc) with only the standard library."""
import struct, sys, zlib

w, h = 320, 240
rows = []
for y in range(h):
    row = bytearray([0])
    for x in range(w):
        inside = (x - 160) ** 2 + (y - 120) ** 2 < 70 ** 2
        row += bytes([(x * 255) // w, (y * 255) // h, 220 if inside else 40])
    rows.append(bytes(row))


def chunk(t, d):
    return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)


png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
