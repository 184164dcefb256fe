#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fatbin.py - what a CUDA fatbinary holds, for tests (no cuobjdump needed).

    fatbin.py FILE            one line per image: "elf 75" or "ptx 120"
    fatbin.py --ptx SM FILE   the text of the PTX image for SM (zstd-
                              compressed images go through the zstd tool)

FILE is the raw .nv_fatbin section (objcopy -O binary --only-section=
.nv_fatbin BINARY FILE): fatbinaries one after another, each a 16-byte
header (magic 0xBA55ED50, version, header size, size of the images) and
images, each with its own header: kind (1 PTX, 2 ELF), header size,
padded payload size, the payload size when compressed, and the SM
number at byte 28.
"""
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50


def images(data):
    off = 0
    while off + 16 <= len(data):
        magic, _, hsize, size = struct.unpack_from("<IHHQ", data, off)
        if magic != MAGIC:
            if data[off:].strip(b"\0"):
                sys.exit(f"fatbin.py: no fatbinary at offset {off}")
            return
        pos, end = off + hsize, off + hsize + size
        while pos < end:
            kind, _, ehsize, padded = struct.unpack_from("<HHIQ", data, pos)
            packed, = struct.unpack_from("<I", data, pos + 16)
            sm, = struct.unpack_from("<I", data, pos + 28)
            payload = data[pos + ehsize:pos + ehsize + padded]
            if packed:
                payload = payload[:packed]
            yield {1: "ptx", 2: "elf"}.get(kind, str(kind)), sm, payload
            pos += ehsize + padded
        off = end


def main():
    args = sys.argv[1:]
    if len(args) == 1:
        for kind, sm, _ in images(open(args[0], "rb").read()):
            print(kind, sm)
        return
    if len(args) == 3 and args[0] == "--ptx":
        for kind, sm, payload in images(open(args[2], "rb").read()):
            if kind != "ptx" or str(sm) != args[1]:
                continue
            if payload[:4] == b"\x28\xb5\x2f\xfd":  # zstd frame
                payload = subprocess.run(["zstd", "-dcq"], input=payload,
                                         capture_output=True,
                                         check=True).stdout
            sys.stdout.write(payload.rstrip(b"\0").decode())
            return
        sys.exit(f"fatbin.py: no PTX image for sm {args[1]}")
    sys.exit(__doc__)


main()
