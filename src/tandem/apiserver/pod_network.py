"""Which 127.X.0.0/16 block a local API server hands pod IPs from.

Without engine stand-ins nothing listens on a pod IP, and every server hands out 127.10.x.y
(the same run, the same addresses). With them, a stand-in listens on its pod's IP, so two
servers on one machine (two test workers, a user's server and a test's) must not hand out
the same addresses: such a server reserves a block of its own, the first free from 127.10
upward, by binding (not listening on) a TCP socket at 127.X.255.254:RESERVE_PORT for its
life. The next server finds that address taken and moves on. 127.20.0.0/16 is skipped: it
holds the made-up host IPs (never bound). Every address stays in 127.0.0.0/8.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

DEFAULT_BLOCK = 10
HOST_BLOCK = 20  # kubelets' host IPs: 127.20.x.y
RESERVE_PORT = 47_011
PER_THIRD = 254  # .1 to .254 in each 127.X.Y.0/24


def address(block: int, n: int) -> str:
    """The `n`-th pod IP of `block` (n >= 1): 127.block.0.2, 127.block.0.3, ...; the third
    octet stays below 255, so the reservation's 127.X.255.254 is never a pod's."""
    return f"127.{block}.{n // PER_THIRD % 255}.{n % PER_THIRD + 1}"


class NoFreeBlock(OSError):
    """Every block is held by another local API server."""


@dataclass
class Reservation:
    block: int
    _socket: socket.socket

    def release(self) -> None:
        self._socket.close()


def reserve(first: int = DEFAULT_BLOCK) -> Reservation:
    """The first block from `first` up that no other server on this machine holds, held
    until `release()`."""
    for block in range(first, 255):
        if block == HOST_BLOCK:
            continue
        held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            held.bind((f"127.{block}.255.254", RESERVE_PORT))
        except OSError:
            held.close()
            continue
        return Reservation(block, held)
    raise NoFreeBlock(f"every 127.X.0.0/16 block from 127.{first} up is held by another local API server")
