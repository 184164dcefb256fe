#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ckpt_tool.py - read dlaunch-train checkpoints independently of the trainer.

The layout is the one trainer/ckpt.h documents (32-byte header with
magic, version, header and payload CRC-32C; payload with shape, counters,
parameters, momentum, buffers). The reliability suite uses this to check
checkpoints with code that is not the trainer's own.

  ckpt_tool.py verify FILE...   exit 0 when every FILE is a valid checkpoint
                                (prints "FILE: step N" or the problem)
  ckpt_tool.py digest FILE      "step=N epoch=E offset=O params=SHA256"
                                (SHA-256 over parameters + momentum + buffers)
  ckpt_tool.py newest DIR       the newest valid checkpoint file of DIR
"""

import hashlib
import os
import re
import struct
import sys

MAGIC = b"DLTRCKPT"
HEADER = 32


def _table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


TABLE = _table()


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    t = TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


class Bad(Exception):
    pass


def parse(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < HEADER:
        raise Bad(f"{len(data)} bytes, shorter than the header")
    magic, version, hcrc, plen, pcrc, reserved = struct.unpack_from(
        "<8sIIQII", data, 0)
    if magic != MAGIC:
        raise Bad("bad magic")
    if version != 1:
        raise Bad(f"version {version}")
    zeroed = data[:12] + b"\0\0\0\0" + data[16:HEADER]
    if crc32c(zeroed) != hcrc:
        raise Bad("header checksum mismatch")
    if len(data) != HEADER + plen:
        raise Bad(f"size {len(data)}, header says {HEADER + plen}")
    payload = data[HEADER:]
    if crc32c(payload) != pcrc:
        raise Bad("payload checksum mismatch")
    off = 0
    (n_layers,) = struct.unpack_from("<I", payload, off)
    off += 4
    widths = struct.unpack_from(f"<{n_layers + 1}I", payload, off)
    off += 4 * (n_layers + 1)
    (bn,) = struct.unpack_from("<I", payload, off)
    off += 4
    step, epoch, offset, seed, rkey, rctr = struct.unpack_from(
        "<6Q", payload, off)
    off += 48
    gbatch, has_mom = struct.unpack_from("<II", payload, off)
    off += 8
    n_params, n_buffers = struct.unpack_from("<QQ", payload, off)
    off += 16
    need = off + 4 * (2 * n_params + n_buffers)
    if need != len(payload):
        raise Bad(f"payload {len(payload)} bytes, counts need {need}")
    return {"step": step, "epoch": epoch, "offset": offset,
            "widths": widths, "state": payload[off:]}


def verify(paths):
    bad = 0
    for p in paths:
        try:
            c = parse(p)
            print(f"{p}: step {c['step']}")
        except (Bad, OSError, struct.error) as e:
            print(f"{p}: {e}")
            bad += 1
    return 1 if bad else 0


def digest(path):
    c = parse(path)
    h = hashlib.sha256(c["state"]).hexdigest()
    print(f"step={c['step']} epoch={c['epoch']} offset={c['offset']} "
          f"params={h}")
    return 0


def newest(d):
    files = sorted((f for f in os.listdir(d)
                    if re.fullmatch(r"ckpt-\d+\.dlck", f)), reverse=True)
    for f in files:
        try:
            parse(os.path.join(d, f))
            print(os.path.join(d, f))
            return 0
        except (Bad, OSError, struct.error):
            continue
    return 1


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    cmd = sys.argv[1]
    try:
        if cmd == "verify":
            return verify(sys.argv[2:])
        if cmd == "digest":
            return digest(sys.argv[2])
        if cmd == "newest":
            return newest(sys.argv[2])
    except (Bad, OSError, struct.error) as e:
        print(f"ckpt_tool: {sys.argv[2]}: {e}", file=sys.stderr)
        return 1
    print(f"ckpt_tool: unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
