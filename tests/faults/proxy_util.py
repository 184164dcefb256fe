# SPDX-License-Identifier: Apache-2.0
"""proxy_util.py - what the test proxies (netem_proxy.py, http_tap.py)
share: ending a connection the way a cut-off host looks to its peer."""
import socket
import struct


def rst(writer):
    """Close writer's connection with a TCP reset (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                            struct.pack("ii", 1, 0))
        except OSError:
            pass
    writer.close()
