"""Bad input to the negotiated handshake: message 2 under AESGCM and the policy's
``custom["noise"]`` field (message number, cipher byte, Noise message) mutated at random
read or refuse with a decision, never raise anything else (the decoders of
tests/fuzz/targets.py cover ChaChaPoly's messages)."""

from __future__ import annotations

import random

import pytest

from exon.core.events import PeerId
from exon.core.frames import Decision, LinkMetadata
from exon.core.policy import HANDSHAKE_FIELD, PolicyContext
from exon.crypto import EncryptedPolicy, Keypair, libcrypto, seal
from exon.crypto.noise import HandshakeError, HandshakeState
from exon.crypto.policy import PROLOGUE
from tests.fuzz.targets import mutate

pytestmark = [
    pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing"),
    pytest.mark.skipif(not seal.aes_available(), reason="no hardware AES here"),
]

INITIATOR, RESPONDER = bytes(range(32)), bytes(range(32, 64))
EPHEMERAL = bytes(range(64, 96))
ROUNDS = 200


def _initiator(message1: list[bytes] | None = None) -> HandshakeState:
    state = HandshakeState(initiator=True, static_secret=INITIATOR, prologue=PROLOGUE,
                           cipher="AESGCM", ephemeral_secret=EPHEMERAL)
    written = state.write_message1(b"")
    if message1 is not None:
        message1.append(written)
    return state


def test_aesgcm_message2_reads_or_raises_handshake_error() -> None:
    seeds = []
    for payload in (b"", b"x" * 32, b"y" * 200):
        message1: list[bytes] = []
        _initiator(message1)
        responder = HandshakeState(initiator=False, static_secret=RESPONDER,
                                   prologue=PROLOGUE, cipher="AESGCM")
        responder.read_message1(message1[0])
        seeds.append(responder.write_message2(payload))
    assert _initiator().read_message2(seeds[1]) == b"x" * 32
    rng = random.Random(28)
    refused = 0
    for _ in range(ROUNDS):
        try:
            _initiator().read_message2(mutate(rng, seeds, max_length=2048))
        except HandshakeError:
            refused += 1
    assert refused > ROUNDS // 2


def test_a_mutated_noise_field_gets_a_decision_never_an_exception() -> None:
    server, client = Keypair.generate(), Keypair.generate()
    policy = EncryptedPolicy(server, trusted=[client.public])
    ctx = PolicyContext(tag=1, socket_type="pull", node_id="server", reply_address="s",
                        peer=PeerId("c", 7), nonce=b"s" * 16)
    message1: list[bytes] = []
    _initiator(message1)
    seeds = [bytes([1, 0x03]) + message1[0], bytes([2, 0x02]) + bytes(128), b"\x01", b""]
    rng = random.Random(2028)
    decisions = set()
    for n in range(ROUNDS):
        peer = LinkMetadata(socket_type="push", credits=8, max_message_size=1024,
                            node_id="client", reply_address="c", nonce=b"%015d" % n,
                            custom={HANDSHAKE_FIELD: mutate(rng, seeds, max_length=1200)})
        decision, reason = policy.decide(ctx, peer)
        assert isinstance(reason, str)
        decisions.add(decision)
    assert decisions == {Decision.UNAUTHORIZED}
