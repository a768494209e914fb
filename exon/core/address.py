"""How a node and a socket are named: ``"HOST:PORT"`` and ``"HOST:PORT/TAG"``.

Below both the middleware (a Node binds an endpoint and names its peers) and the sockets
(``link("HOST:PORT/TAG")``), so neither imports the other for it. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from exon.errors import ConfigurationError

__all__ = ["Peer", "join_address", "split_address"]

_TAG_MAX = 0xFFFF_FFFF


@dataclass(frozen=True, slots=True)
class Peer:
    """A remote socket: its node's ``host`` and ``port`` and the socket's ``tag``."""

    host: str
    port: int
    tag: int

    def __post_init__(self) -> None:
        if not isinstance(self.port, int) or not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port {self.port!r} is not in 0..65535")
        if not isinstance(self.tag, int) or not 0 <= self.tag <= _TAG_MAX:
            raise ConfigurationError(f"tag {self.tag!r} is not an unsigned 32-bit integer")
        if not self.host:
            raise ConfigurationError("peer host is empty")

    @classmethod
    def parse(cls, text: str | Peer) -> Peer:
        """``"HOST:PORT/TAG"`` (IPv6 hosts in brackets: ``"[::1]:4000/7"``)."""
        if isinstance(text, Peer):
            return text
        if not isinstance(text, str):
            raise ConfigurationError(f"a peer is 'HOST:PORT/TAG', not {text!r}")
        address, sep, tag_text = text.rpartition("/")
        if not sep:
            raise ConfigurationError(f"peer {text!r} has no '/TAG' (want HOST:PORT/TAG)")
        host, port = split_address(address, what=f"peer {text!r}")
        try:
            tag = int(tag_text, 10)
        except ValueError:
            raise ConfigurationError(f"peer {text!r}: tag {tag_text!r} is not an integer") from None
        return cls(host, port, tag)

    @property
    def address(self) -> str:
        """The node address, ``"HOST:PORT"`` (the core's opaque address)."""
        return join_address(self.host, self.port)

    def __str__(self) -> str:
        return f"{self.address}/{self.tag}"


def split_address(address: str, *, what: str = "address") -> tuple[str, int]:
    """``"HOST:PORT"`` or ``"[V6]:PORT"`` -> (host, port)."""
    if address.startswith("["):
        end = address.find("]")
        if end < 0 or address[end + 1 : end + 2] != ":":
            raise ConfigurationError(f"{what}: bad IPv6 address {address!r} (want [HOST]:PORT)")
        host, port_text = address[1:end], address[end + 2 :]
    else:
        host, sep, port_text = address.rpartition(":")
        if not sep:
            raise ConfigurationError(f"{what}: {address!r} has no ':PORT'")
    if not host:
        raise ConfigurationError(f"{what}: empty host in {address!r}")
    try:
        port = int(port_text, 10)
    except ValueError:
        raise ConfigurationError(f"{what}: port {port_text!r} is not an integer") from None
    if not 0 <= port <= 65535:
        raise ConfigurationError(f"{what}: port {port} is not in 0..65535")
    return host, port


def join_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
