"""``EncryptedPolicy``: encrypted, authenticated links (docs/protocol.md 2.20).

Given to both sockets of a link, as :class:`~exon.core.policy.SharedSecretPolicy` is::

    pull = node.socket("pull", tag=1, policy=EncryptedPolicy(server, trusted=[client.public]))
    push = node.socket("push", policy=EncryptedPolicy(client, peer_key=server.public))

The handshake is Noise IX (:mod:`exon.crypto.noise`) in the metadata's
``custom["noise"]`` field: message 1 in the LINK, message 2 in the LINKACK that answers
it, each carrying the SHA-256 of the sender's metadata and the link's tags (so neither can
be changed on the way). Message 1 offers ciphers (AESGCM where the initiator has hardware
AES, ChaChaPoly always), message 2 names the responder's choice (AESGCM when both have
it): the offer is in the prologue and the choice in the protocol name, so an on-path
change of either makes message 2 fail to authenticate (no downgrade). The peer's static
key must then pass :meth:`accepts`: equal to ``peer_key`` when one is pinned, and in
``trusted`` when a list is given (``ANY_KEY``: any key, encryption without authenticating
the peer, spelled out, never a default). A refusal is ``UNAUTHORIZED`` (permanent), as is
a peer without encryption.

A LINK whose ephemeral key was seen in the last ``replay_window`` handshakes is refused
(a replayed LINK); a replay older than that gets an answer but never a link, since only the
holder of the initiator's keys can send the sealed LINKACK that completes it.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import msgpack

from exon.core.frames import Decision, LinkMetadata
from exon.core.policy import HANDSHAKE_FIELD, LinkPolicy, PolicyContext
from exon.core.sealing import LinkSeal
from exon.crypto import libcrypto
from exon.crypto.keys import Keypair, key_from_text, key_to_text
from exon.crypto.noise import HandshakeError, HandshakeState
from exon.crypto.seal import (
    AESGCM,
    CHACHAPOLY,
    CIPHERS,
    DEFAULT_REKEY_SHIFT,
    TransportSeal,
    aes_available,
    local_ciphers,
)
from exon.errors import EncryptionUnavailable

__all__ = [
    "ANY_KEY",
    "CIPHER_BITS",
    "PROLOGUE",
    "AnyKey",
    "EncryptedPolicy",
    "choose_cipher",
    "metadata_binding",
]

#: bound into every handshake (Noise prologue, followed by the offer byte): the protocol
#: and its version
PROLOGUE: Final = b"exon link v2"
MESSAGE1: Final = 1
MESSAGE2: Final = 2
#: a cipher's bit in the offer byte of message 1 (and its choice byte in message 2)
CIPHER_BITS: Final = {CHACHAPOLY: 0x01, AESGCM: 0x02}


def choose_cipher(offer: int, ours: tuple[str, ...]) -> str | None:
    """The responder's choice: the first of ``ours`` (best first) that ``offer`` has."""
    for cipher in ours:
        if offer & CIPHER_BITS[cipher]:
            return cipher
    return None


class AnyKey:
    """The type of :data:`ANY_KEY`."""

    _instance: AnyKey | None = None

    def __new__(cls) -> AnyKey:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "exon.ANY_KEY"


#: ``trusted=ANY_KEY``: accept a peer with any key (encryption without authentication)
ANY_KEY: Final = AnyKey()


def metadata_binding(meta: LinkMetadata, source_tag: int, destination_tag: int) -> bytes:
    """What a handshake message vouches for: SHA-256 of the metadata fields that route and
    identify (type, max size, node, reply address, nonce) and the link's two tags."""
    fields = [meta.socket_type, meta.max_message_size, meta.node_id, meta.reply_address,
              meta.nonce, source_tag, destination_tag]
    packed: bytes = msgpack.packb(fields, use_bin_type=True)
    return hashlib.sha256(b"exon metadata v1" + packed).digest()


@dataclass(slots=True)
class _Attempt:
    """Our side of one handshake (keyed by our metadata nonce)."""

    state: HandshakeState  #: the initiator's: its first offer's, until message 2 chose
    message: bytes = b""  #: what we sent (repeated as is with a repeated LINK/LINKACK)
    offered: dict[int, HandshakeState] | None = None  #: initiator: a state per offered bit
    choice: int = 0  #: responder: the chosen cipher's bit
    seal: TransportSeal | None = None
    accepted: bool = False  #: we accepted the peer's message (its key passed)


def _as_key(value: bytes | str | Keypair) -> bytes:
    if isinstance(value, Keypair):
        return value.public
    return key_from_text(value)


class EncryptedPolicy(LinkPolicy):
    """Encrypt and authenticate every link of a socket with ``keys``.

    ``trusted``: the peer keys this socket accepts (32 bytes or the printable form each),
    or :data:`ANY_KEY`. ``peer_key``: the one key the peer must prove. Give one of them
    at least; with both, the peer's key must be ``peer_key`` and in ``trusted``.

    ``ciphers``: the AEADs this socket offers or accepts, best first (default: AESGCM where
    this host has hardware AES, then ChaChaPoly); a link uses the responder's first choice
    that the initiator offered.

    Raises :class:`exon.errors.EncryptionUnavailable` when libcrypto cannot be loaded, or
    ``ciphers`` asks for AESGCM on a host without hardware AES.
    """

    encrypted = True

    def __init__(
        self,
        keys: Keypair,
        *,
        trusted: Iterable[bytes | str | Keypair] | AnyKey | None = None,
        peer_key: bytes | str | Keypair | None = None,
        replay_window: int = 4096,
        rekey_shift: int = DEFAULT_REKEY_SHIFT,
        ciphers: Iterable[str] | None = None,
    ) -> None:
        libcrypto.library()  # a clear error now, not at the first link
        self.ciphers = local_ciphers() if ciphers is None else tuple(ciphers)
        unknown = [c for c in self.ciphers if c not in CIPHERS]
        if unknown or not self.ciphers or len(set(self.ciphers)) != len(self.ciphers):
            raise ValueError(f"ciphers must be distinct names among {', '.join(CIPHERS)}, "
                             f"not {self.ciphers!r}")
        if AESGCM in self.ciphers and not aes_available():
            raise EncryptionUnavailable("AESGCM needs hardware AES (AES-NI and CLMUL), which "
                                        "this host lacks: use ciphers=('ChaChaPoly',)")
        self._offer = sum(CIPHER_BITS[c] for c in self.ciphers)
        if not isinstance(keys, Keypair):
            raise TypeError("keys must be an exon.Keypair")
        if trusted is None and peer_key is None:
            raise ValueError("EncryptedPolicy needs trusted=[peer keys] (or exon.ANY_KEY, to "
                             "accept any peer) or peer_key=")
        self.keys = keys
        self.trusted: frozenset[bytes] | AnyKey | None = (
            trusted if isinstance(trusted, AnyKey) or trusted is None
            else frozenset(_as_key(k) for k in trusted))
        self.peer_key = _as_key(peer_key) if peer_key is not None else None
        self._replay_window = replay_window
        self._rekey_shift = rekey_shift
        self._attempts: OrderedDict[bytes, _Attempt] = OrderedDict()
        self._seen: OrderedDict[bytes, None] = OrderedDict()
        self._negotiated = dict.fromkeys(CIPHERS, 0)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        trusted = (repr(self.trusted) if isinstance(self.trusted, AnyKey) or self.trusted is None
                   else f"{len(self.trusted)} keys")
        peer = key_to_text(self.peer_key) if self.peer_key is not None else None
        return f"<EncryptedPolicy {self.keys.public_text} trusted={trusted} peer_key={peer}>"

    def negotiated(self) -> dict[str, int]:
        """Handshakes this policy accepted, by the cipher they chose (a copy)."""
        with self._lock:
            return dict(self._negotiated)

    def accepts(self, key: bytes) -> tuple[bool, str]:
        """Whether a peer proving ``key`` passes; the reason when not."""
        if self.peer_key is not None and key != self.peer_key:
            return False, f"the peer's key {key_to_text(key)} is not the pinned peer_key"
        if self.trusted is None or isinstance(self.trusted, AnyKey):
            return True, ""
        if key not in self.trusted:
            return False, f"the peer's key {key_to_text(key)} is not trusted"
        return True, ""

    # ---- records --------------------------------------------------------------------------

    def _keep(self, nonce: bytes, attempt: _Attempt) -> None:
        self._attempts[nonce] = attempt
        self._attempts.move_to_end(nonce)
        while len(self._attempts) > self._replay_window:
            self._attempts.popitem(last=False)

    def _new_seal(self, state: HandshakeState) -> TransportSeal:
        send, recv = state.split()
        return TransportSeal(send, recv, cipher=state.cipher, rekey_shift=self._rekey_shift)

    def _message1(self, payload: bytes) -> _Attempt:
        """Message 1 with our offer: one state per offered cipher, one fresh ephemeral (IX's
        message 1 encrypts nothing, so its bytes are the same for every cipher; the
        handshake hashes differ by name and continue with message 2's choice)."""
        prologue = PROLOGUE + bytes([self._offer])
        ephemeral = libcrypto.random_bytes(32)
        offered = {CIPHER_BITS[c]: HandshakeState(
            initiator=True, static_secret=self.keys.secret, prologue=prologue, cipher=c,
            ephemeral_secret=ephemeral) for c in self.ciphers}
        messages = {state.write_message1(payload) for state in offered.values()}
        assert len(messages) == 1
        message = bytes([MESSAGE1, self._offer]) + messages.pop()
        return _Attempt(next(iter(offered.values())), message, offered)

    # ---- LinkPolicy -----------------------------------------------------------------------

    def metadata(self, ctx: PolicyContext, peer: LinkMetadata | None) -> dict[str, Any]:
        """Message 1 (we send a LINK) or message 2 (we answer one we accepted)."""
        own = ctx.own
        assert own is not None
        with self._lock:
            attempt = self._attempts.get(ctx.nonce)
            if peer is None:  # our LINK: message 1 (the same one when the LINK is repeated)
                if attempt is None or not attempt.state.initiator:
                    attempt = self._message1(metadata_binding(own, ctx.tag, ctx.peer.tag))
                    self._keep(ctx.nonce, attempt)
                return {HANDSHAKE_FIELD: attempt.message}
            if attempt is None or attempt.state.initiator or not attempt.accepted:
                return {}  # a refusal, or we sent our LINK first (no message 2 then)
            if not attempt.message:
                payload = metadata_binding(own, ctx.tag, ctx.peer.tag)
                try:
                    attempt.message = bytes([MESSAGE2, attempt.choice]) + (
                        attempt.state.write_message2(payload))
                except HandshakeError:
                    return {}
                attempt.seal = self._new_seal(attempt.state)
            return {HANDSHAKE_FIELD: attempt.message}

    def decide(self, ctx: PolicyContext, peer: LinkMetadata) -> tuple[Decision, str]:
        """Read the peer's handshake message; accept when it reads and its key passes."""
        field = peer.custom.get(HANDSHAKE_FIELD)
        if not isinstance(field, bytes) or not field:
            return Decision.UNAUTHORIZED, "the peer socket does not encrypt (no EncryptedPolicy)"
        if len(field) < 2:
            return Decision.UNAUTHORIZED, "handshake: a message without its cipher byte"
        kind, ciphers, message = field[0], field[1], field[2:]
        binding = metadata_binding(peer, ctx.peer.tag, ctx.tag)
        with self._lock:
            attempt = self._attempts.get(ctx.nonce)
            if kind == MESSAGE1:
                if attempt is not None and attempt.state.initiator:
                    # both sides sent a LINK: no roles; both retry later, one answers
                    return Decision.TEMPORARY, "simultaneous encrypted handshakes"
                cipher = choose_cipher(ciphers, self.ciphers)
                if cipher is None:
                    return Decision.UNAUTHORIZED, (
                        f"handshake: no cipher in common (offered {ciphers:#04x}, ours "
                        f"{', '.join(self.ciphers)})")
                state = HandshakeState(initiator=False, static_secret=self.keys.secret,
                                       prologue=PROLOGUE + bytes([ciphers]), cipher=cipher)
                try:
                    payload = state.read_message1(message)
                except HandshakeError as exc:
                    return Decision.UNAUTHORIZED, f"handshake: {exc}"
                ephemeral = state.remote_ephemeral
                assert ephemeral is not None
                if ephemeral in self._seen:
                    return Decision.UNAUTHORIZED, "replayed handshake"
                self._seen[ephemeral] = None
                while len(self._seen) > self._replay_window:
                    self._seen.popitem(last=False)
                attempt = _Attempt(state, choice=CIPHER_BITS[cipher])
            elif kind == MESSAGE2:
                if attempt is None or not attempt.state.initiator:
                    return Decision.UNAUTHORIZED, "handshake message 2 without our message 1"
                if attempt.seal is not None:  # a repeated message 2: decided already
                    return (Decision.ACCEPTED, "") if attempt.accepted else (
                        Decision.UNAUTHORIZED, "handshake refused")
                chosen = (attempt.offered or {}).get(ciphers)
                if chosen is None:  # not one bit we offered: refused, never a fallback
                    return Decision.UNAUTHORIZED, (
                        f"handshake: the peer chose cipher {ciphers:#04x}, not offered")
                attempt.state = chosen
                attempt.offered = None  # the other states (and their ephemeral secret) go
                try:
                    payload = attempt.state.read_message2(message)
                except HandshakeError as exc:
                    return Decision.UNAUTHORIZED, f"handshake: {exc}"
                attempt.seal = self._new_seal(attempt.state)
            else:
                return Decision.UNAUTHORIZED, f"unknown handshake message {kind}"
            if payload != binding:
                return Decision.UNAUTHORIZED, "the peer's metadata is not what its handshake signs"
            remote = attempt.state.remote_static
            assert remote is not None
            ok, reason = self.accepts(remote)
            if not ok:
                return Decision.UNAUTHORIZED, reason
            attempt.accepted = True
            self._negotiated[attempt.state.cipher] += 1
            self._keep(ctx.nonce, attempt)
            return Decision.ACCEPTED, ""

    def link_seal(self, ctx: PolicyContext) -> LinkSeal | None:
        with self._lock:
            attempt = self._attempts.get(ctx.nonce)
            if attempt is None or not attempt.accepted:
                return None
            return attempt.seal
