#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""master_meet.py - a worker that needs MASTER_ADDR to be reachable, as
every distributed program's bootstrap does: rank 0 listens on MASTER_PORT,
every other rank connects to MASTER_ADDR:MASTER_PORT (retrying for 20 s)
and says its rank; rank 0 exits 0 once all have. A rank that cannot reach
the master prints the address it was given and exits 1."""
import os
import socket
import sys
import time

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
addr = os.environ["MASTER_ADDR"]
port = int(os.environ["MASTER_PORT"])
print(f"rank {rank}: MASTER_ADDR={addr} MASTER_PORT={port}", flush=True)
if rank == 0:
    srv = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("::" if ":" in addr else "0.0.0.0", port))
    srv.listen(world)
    srv.settimeout(30)
    seen = set()
    while len(seen) < world - 1:
        conn, _ = srv.accept()
        seen.add(conn.recv(16).decode())
        conn.close()
    print(f"rank 0: met ranks {sorted(seen)}", flush=True)
    sys.exit(0)
deadline = time.monotonic() + 20
while True:
    try:
        with socket.create_connection((addr, port), timeout=2) as c:
            c.sendall(str(rank).encode())
        print(f"rank {rank}: reached the master", flush=True)
        sys.exit(0)
    except OSError as e:
        if time.monotonic() > deadline:
            print(f"rank {rank}: cannot reach the master at {addr}:{port}: {e}",
                  flush=True)
            sys.exit(1)
        time.sleep(0.2)
