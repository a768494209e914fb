"""The archive over encrypted links: ingest from an encrypting producer, remote replay and
keyed queries with the service's key pinned (issue 28)."""

from __future__ import annotations

import random

import pytest

import exon
from exon.archive import ArchiveClient, ArchiveError, ArchiveService
from exon.crypto import libcrypto
from tests.archive.conftest import SEGMENT

pytestmark = [pytest.mark.net,
              pytest.mark.skipif(not libcrypto.available(), reason="libcrypto.so.3 missing")]


def test_ingest_and_replay_over_encrypted_links(tmp_path) -> None:
    service_keys, client_keys = exon.Keypair.generate(), exon.Keypair.generate()
    server_policy = exon.EncryptedPolicy(service_keys, trusted=[client_keys.public])
    client_policy = exon.EncryptedPolicy(client_keys, peer_key=service_keys.public)
    rng = random.Random(28)
    payloads = [rng.randbytes(rng.choice([0, 1, 64, 1400, 9000])) for _ in range(120)]
    with ArchiveService(str(tmp_path / "arch"), ingest={"orders": 10}, segment_length=SEGMENT,
                        policy=server_policy) as svc, exon.Node() as producer:
        plain = producer.socket("push")
        with pytest.raises(exon.LinkRefused) as info:  # the service takes no plaintext
            plain.link(f"{svc.address}/10", timeout=5)
        assert info.value.reason == "UNAUTHORIZED"
        push = producer.socket("push", policy=client_policy)
        push.link(f"{svc.address}/10", timeout=10)
        for i, p in enumerate(payloads):
            push.send(p, cookie=i, timeout=10)
        cookies = [push.receive(timeout=10) for _ in payloads]
        assert sorted(c.value for c in cookies) == list(range(len(payloads)))
        with ArchiveClient(svc.address, node=producer, policy=client_policy) as ac:
            got = list(ac.replay("orders"))  # the service's PUSH links to our PULL
            assert [r.payload for r in got] == payloads
        assert svc.node.statistics().unopened_dropped == 0
        with ArchiveClient(svc.address, node=producer) as stranger, pytest.raises(
                ArchiveError, match="UNAUTHORIZED"):
            stranger.recordings()


def test_replication_over_encrypted_links(tmp_path) -> None:
    primary_keys, replica_keys, client_keys = (exon.Keypair.generate() for _ in range(3))
    primary_policy = exon.EncryptedPolicy(
        primary_keys, trusted=[replica_keys.public, client_keys.public])
    replica_policy = exon.EncryptedPolicy(replica_keys, trusted=[primary_keys.public])
    client_policy = exon.EncryptedPolicy(client_keys, peer_key=primary_keys.public)
    with ArchiveService(str(tmp_path / "p"), ingest={"orders": 10}, segment_length=SEGMENT,
                        policy=primary_policy, min_insync=2) as primary, \
            ArchiveService(str(tmp_path / "r"), replica_of=primary.address,
                           policy=replica_policy) as replica, exon.Node() as producer:
        push = producer.socket("push", policy=client_policy)
        push.link(f"{primary.address}/10", timeout=10)
        for i in range(50):
            push.send(b"secret-%d" % i, cookie=i, timeout=10)
        # min-insync 2: the cookies mean the replica has them, over the encrypted stream
        assert sorted(push.receive(timeout=20).value for _ in range(50)) == list(range(50))
        assert replica.archive.stop_position("orders") >= primary.insync.confirmed(1) > 0
        assert [r.payload for r in replica.archive.replay("orders")] == [
            b"secret-%d" % i for i in range(50)]
