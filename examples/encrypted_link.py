"""Encrypted, authenticated links: ``exon.Keypair`` and ``exon.EncryptedPolicy``.

    python examples/encrypted_link.py

The server's PULL trusts one client key; the client's PUSH pins the server's key. Their
link is made with a Noise handshake (X25519) and every frame of it is sealed
(ChaCha20-Poly1305, from OpenSSL's libcrypto): nobody on the path can read, change, replay
or inject a message. A client with another key, and a client without encryption, are
refused with ``exon.LinkRefused`` (``UNAUTHORIZED``, permanent).

Uses the media driver of ``$EXON_NODE_DRIVER_DIR`` when set, else the host's (``exon
driver``) if one runs, else embeds one; it says which. Keys here are made in memory; in
production make them once with ``exon keygen PATH`` (mode 0600) and load them with
``exon.Keypair.load(PATH)``.
Prints ``ok`` and exits 0 when exactly the right cases were refused.
"""

from __future__ import annotations

import os
import sys

import exon

TIMEOUT = 10.0


def make_node() -> exon.Node:
    """A node on the driver of ``$EXON_NODE_DRIVER_DIR``, else the host's (``exon
    driver``) if one runs, else a driver of its own; says which."""
    node = exon.Node("127.0.0.1:0", driver_dir=os.environ.get("EXON_NODE_DRIVER_DIR") or None)
    if node.driver_kind == "embedded":
        print("no media driver running here: this node embeds one of its own")
    else:
        print(f"using the media driver in {node.driver_dir}")
    return node


def try_link(node: exon.Node, peer: str, policy: exon.EncryptedPolicy | None,
             pull: exon.Socket) -> str:
    with node.socket("push", policy=policy) as push:
        try:
            push.link(peer, timeout=TIMEOUT)
        except exon.LinkRefused as exc:
            return f"refused: {exc.reason} (permanent={exc.permanent})"
        push.send(b"for your eyes only", timeout=TIMEOUT)
        return f"linked, the PULL received {pull.receive(timeout=TIMEOUT).payload!r}"


def main() -> int:
    server_keys, client_keys = exon.Keypair.generate(), exon.Keypair.generate()
    print(f"server key {server_keys.public_text}")
    with make_node() as server, make_node() as client:
        pull = server.socket("pull", tag=5, policy=exon.EncryptedPolicy(
            server_keys, trusted=[client_keys.public]))
        peer = f"{server.address}/5"
        outcomes = {
            "trusted client": try_link(client, peer, exon.EncryptedPolicy(
                client_keys, peer_key=server_keys.public), pull),
            "unknown client": try_link(client, peer, exon.EncryptedPolicy(
                exon.Keypair.generate(), peer_key=server_keys.public), pull),
            "no encryption": try_link(client, peer, None, pull),
        }
    for case, outcome in outcomes.items():
        print(f"{case}: {outcome}")
    ok = (outcomes["trusted client"] == "linked, the PULL received b'for your eyes only'"
          and outcomes["unknown client"] == outcomes["no encryption"]
          == "refused: UNAUTHORIZED (permanent=True)")
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
