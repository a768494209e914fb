"""Link policies: socket-type compatibility and pluggable decisions on the peer's metadata.

The core decides every link in this order (the first refusal wins):

1. socket types must be compatible (:data:`COMPATIBLE`), else ``INCOMPATIBLE`` (permanent);
2. the socket's link limit, else ``LINK_LIMIT`` (temporary);
3. the socket's :class:`LinkPolicy`, if any: it adds ``custom`` metadata and decides.

:class:`SharedSecretPolicy` is a real policy: HMAC-SHA256 challenge/response with a secret
both sides know, carried in the handshake's ``custom["auth"]`` field (see
docs/protocol.md). A socket using it refuses peers that cannot prove the secret with
``UNAUTHORIZED``; since no link exists, their DATA gets ``SOCKET_NOT_LINKED``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from exon.core.events import PeerId
from exon.core.frames import Decision, LinkMetadata
from exon.core.sealing import LinkSeal

#: Which socket types may link with which. Symmetric. Extend with :func:`register_socket_type`.
#: docs/protocol.md 2.4 is this table: a peer decides with it whether it knows our sockets
#: or not, so a type is added here (not by the socket module) to be refused consistently.
COMPATIBLE: dict[str, frozenset[str]] = {
    "req": frozenset({"rep", "router"}),
    "rep": frozenset({"req", "dealer"}),
    "push": frozenset({"pull"}),
    "pull": frozenset({"push"}),
    "dealer": frozenset({"rep", "router"}),
    "router": frozenset({"req", "dealer"}),
    "pub": frozenset({"sub"}),
    "sub": frozenset({"pub"}),
}


def register_socket_type(name: str, peers: set[str] | frozenset[str]) -> None:
    """Declare a socket type and the types it links with (both directions are recorded)."""
    COMPATIBLE[name] = frozenset(COMPATIBLE.get(name, frozenset()) | set(peers))
    for other in peers:
        COMPATIBLE[other] = frozenset(COMPATIBLE.get(other, frozenset()) | {name})


def compatible(ours: str, theirs: str) -> bool:
    return theirs in COMPATIBLE.get(ours, frozenset())


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """What a policy knows about the local side of the link being decided."""

    tag: int  #: local socket tag
    socket_type: str
    node_id: str
    reply_address: str
    peer: PeerId  #: the remote socket
    nonce: bytes  #: the nonce of *our* metadata for this handshake
    #: our metadata being built (without ``custom``), when :meth:`LinkPolicy.metadata` runs
    own: LinkMetadata | None = None


#: The ``custom`` key of an encrypted link's handshake (``exon.crypto.EncryptedPolicy``). A
#: socket without an encrypting policy refuses metadata that carries it (``UNAUTHORIZED``):
#: the peer wants an encrypted link and would refuse ours anyway.
HANDSHAKE_FIELD = "noise"


class LinkPolicy:
    """Base policy: adds nothing, accepts everything. Subclass and override both hooks.

    An encrypting policy sets :attr:`encrypted` and hands the core the link's keys through
    :meth:`link_seal` once the handshake agreed on them (see ``exon.crypto``)."""

    #: whether links of this policy are sealed (docs/protocol.md 2.20)
    encrypted: bool = False

    def metadata(self, ctx: PolicyContext, peer: LinkMetadata | None) -> dict[str, Any]:
        """Custom fields for our metadata. ``peer`` is known when we answer a LINK."""
        return {}

    def decide(self, ctx: PolicyContext, peer: LinkMetadata) -> tuple[Decision, str]:
        """Our decision on the peer's metadata: (Decision.ACCEPTED, "") or a refusal."""
        return Decision.ACCEPTED, ""

    def link_seal(self, ctx: PolicyContext) -> LinkSeal | None:
        """The keys of the link whose handshake ``ctx`` names, once agreed (an encrypting
        policy: after our decision on message 2, or after writing message 2); else None."""
        return None


class SharedSecretPolicy(LinkPolicy):
    """Mutual authentication with a shared secret (HMAC-SHA256).

    Each side's metadata carries ``custom["auth"] = {"mac": bytes, "seen": bytes}`` where
    ``seen`` is the peer nonce the sender had seen (empty in a LINK, which is sent before
    any peer metadata) and ``mac = HMAC(secret, "exon-link-v1" | node | reply | src tag |
    dst tag | own nonce | seen)`` (fields length-prefixed, see docs/protocol.md).

    A proof that answers our nonce (``seen == our nonce``) is fresh. A proof in a LINK
    cannot have seen our nonce; its own nonce must be at least 16 bytes and not seen in
    the last ``replay_window`` LINKs, so a captured LINK cannot be replayed.
    """

    LABEL = b"exon-link-v1"

    def __init__(self, secret: bytes, *, replay_window: int = 4096) -> None:
        if not secret:
            raise ValueError("the shared secret must not be empty")
        self._secret = bytes(secret)
        self._seen_nonces: OrderedDict[bytes, None] = OrderedDict()
        self._replay_window = replay_window

    def _mac(self, node: str, reply: str, src: int, dst: int, nonce: bytes, seen: bytes) -> bytes:
        parts = [node.encode(), reply.encode(), src.to_bytes(4, "little"),
                 dst.to_bytes(4, "little"), nonce, seen]
        msg = self.LABEL + b"".join(len(p).to_bytes(4, "little") + p for p in parts)
        return hmac.new(self._secret, msg, hashlib.sha256).digest()

    def metadata(self, ctx: PolicyContext, peer: LinkMetadata | None) -> dict[str, Any]:
        """``custom["auth"]``: our proof (HMAC over both sockets and our nonce, answering the
        peer's nonce when we answer a LINK)."""
        seen = peer.nonce if peer is not None else b""
        mac = self._mac(ctx.node_id, ctx.reply_address, ctx.tag, ctx.peer.tag, ctx.nonce, seen)
        return {"auth": {"mac": mac, "seen": seen}}

    def decide(self, ctx: PolicyContext, peer: LinkMetadata) -> tuple[Decision, str]:
        """Accept a peer whose proof matches the secret and is fresh (answers our nonce, or carries
        a strong nonce not seen before); else ``UNAUTHORIZED``."""
        auth = peer.custom.get("auth")
        if not isinstance(auth, dict):
            return Decision.UNAUTHORIZED, "peer did not authenticate"
        mac, seen = auth.get("mac"), auth.get("seen", b"")
        if not isinstance(mac, bytes) or not isinstance(seen, bytes):
            return Decision.UNAUTHORIZED, "malformed authentication"
        expected = self._mac(
            peer.node_id, peer.reply_address, ctx.peer.tag, ctx.tag, peer.nonce, seen
        )
        if not hmac.compare_digest(mac, expected):
            return Decision.UNAUTHORIZED, "authentication failed"
        if seen:
            if not hmac.compare_digest(seen, ctx.nonce):
                return Decision.UNAUTHORIZED, "authentication answers another challenge"
            return Decision.ACCEPTED, ""
        if len(peer.nonce) < 16 or peer.nonce in self._seen_nonces:
            return Decision.UNAUTHORIZED, "replayed or weak nonce"
        self._seen_nonces[peer.nonce] = None
        while len(self._seen_nonces) > self._replay_window:
            self._seen_nonces.popitem(last=False)
        return Decision.ACCEPTED, ""
