"""Links that only peers knowing a shared secret can make: ``SharedSecretPolicy``.

    python examples/secure_link.py

A PULL with ``policy=SharedSecretPolicy(secret)`` accepts a link only from a socket whose
policy proves the same secret (HMAC-SHA256 over both sides' fresh nonces, in the link
handshake). A PUSH with the right secret links and sends; one with a wrong secret, and one
with no policy at all, are refused with ``exon.LinkRefused`` (reason ``UNAUTHORIZED``,
permanent: retrying cannot help). The secret never travels; the payloads are not
encrypted (see the guide's security page).

Uses the media driver of ``$EXON_NODE_DRIVER_DIR`` when set, else the host's (``exon
driver``) if one runs, else embeds one; it says which.
Prints ``ok`` and exits 0 when exactly the right cases were refused.
"""

from __future__ import annotations

import os
import sys

import exon
from exon.core import SharedSecretPolicy

TIMEOUT = 10.0
SECRET = b"correct horse battery staple"


def make_node() -> exon.Node:
    """A node on the driver of ``$EXON_NODE_DRIVER_DIR``, else the host's (``exon
    driver``) if one runs, else a driver of its own; says which."""
    node = exon.Node("127.0.0.1:0", driver_dir=os.environ.get("EXON_NODE_DRIVER_DIR") or None)
    if node.driver_kind == "embedded":
        print("no media driver running here: this node embeds one of its own")
    else:
        print(f"using the media driver in {node.driver_dir}")
    return node


def try_link(node: exon.Node, peer: str, policy: SharedSecretPolicy | None,
             pull: exon.Socket) -> str:
    """Link a PUSH with ``policy`` to ``peer``, send one message and see ``pull`` get it."""
    with node.socket("push", policy=policy) as push:
        try:
            push.link(peer, timeout=TIMEOUT)
        except exon.LinkRefused as exc:
            return f"refused: {exc.reason} (permanent={exc.permanent})"
        push.send(b"hello from a friend", timeout=TIMEOUT)
        # received before the PUSH closes: close() waits until the PULL's application
        # took everything sent
        return f"linked, the PULL received {pull.receive(timeout=TIMEOUT).payload!r}"


def main() -> int:
    with make_node() as server, make_node() as client:
        pull = server.socket("pull", tag=5, policy=SharedSecretPolicy(SECRET))
        peer = f"{server.address}/5"
        outcomes = {
            "right secret": try_link(client, peer, SharedSecretPolicy(SECRET), pull),
            "wrong secret": try_link(client, peer, SharedSecretPolicy(b"guess"), pull),
            "no policy": try_link(client, peer, None, pull),
        }
    for case, outcome in outcomes.items():
        print(f"{case}: {outcome}")
    ok = (outcomes["right secret"] == "linked, the PULL received b'hello from a friend'"
          and outcomes["wrong secret"] == outcomes["no policy"]
          == "refused: UNAUTHORIZED (permanent=True)")
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
