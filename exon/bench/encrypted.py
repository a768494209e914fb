"""``exon bench sockets --encrypted``: encrypted links beside plaintext ones and beside pyzmq
with CURVE, in the same run, on the network path (a driver per node, UDP on loopback).

Cases (one JSON line each, :func:`exon.bench.report.emit`; ratio > 1: the first is better):

* ``push_pull_{size}B_udp_encrypted``: exon encrypted vs exon plaintext (msgs/s; goals
  >= 0.7 at 1 KiB, >= 0.5 at 64 B);
* ``push_pull_{size}B_udp_encrypted_vs_curve``: exon encrypted vs pyzmq CURVE over tcp://
  (goal >= 2);
* ``req_rep_64B_p50_udp_encrypted`` / ``_p99_``: round trip (us), encrypted vs plaintext
  (``added_us``: the difference; goal: p50 at most 5 us added), and ``..._vs_curve``.

The workers are the ones of ``exon bench sockets`` (``sockets_worker``, ``zmq_worker``),
given their keys in the environment (``EXON_BENCH_KEYS``, ``EXON_BENCH_CURVE``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from exon.bench.peers import zmq_push_pull, zmq_req_rep, zmq_unavailable_reason
from exon.bench.report import emit
from exon.bench.sockets import exon_push_pull, exon_req_rep
from exon.bench.sockets_worker import KEYS_ENV
from exon.bench.zmq_worker import CURVE_ENV

__all__ = ["run_encrypted_bench"]


@contextmanager
def _environment(name: str, value: str) -> Iterator[None]:
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


def _exon_keys() -> str:
    from exon.crypto import Keypair, key_to_text

    return ",".join(key_to_text(Keypair.generate().secret) for _ in range(2))


def _curve_keys() -> str | None:
    import zmq

    if not zmq.has("curve"):
        return None
    server, client = zmq.curve_keypair(), zmq.curve_keypair()
    return ",".join(k.decode() for k in (*server, *client))


def run_encrypted_bench(*, sizes: tuple[int, ...] = (64, 1024), messages: int = 200_000,
                        round_trips: int = 10_000, credits: int | None = None,
                        with_zmq: bool = True) -> list[dict[str, object]]:
    from exon.crypto import libcrypto, seal

    libcrypto.library()  # a clear error first when encryption cannot work here
    if credits is None:
        from exon.core import LinkSettings

        credits = LinkSettings().initial_credits
    reason = zmq_unavailable_reason() if with_zmq else "disabled"
    curve = _curve_keys() if reason is None else None
    # both workers run on this host, so they offer the same ciphers: the first is chosen
    cipher = seal.local_ciphers()[0]
    extra: dict[str, object] = {"exon_transport": "udp", "peer_transport": "tcp",
                                "cipher": cipher, "handshake": f"Noise_IX_25519_{cipher}_SHA256",
                                "aead_library": seal.backend()}
    keys = _exon_keys()
    lines = []
    for size in sizes:
        plain = exon_push_pull("-", size, messages, credits)
        with _environment(KEYS_ENV, keys):
            sealed = exon_push_pull("-", size, messages, credits)
        lines.append(emit(f"push_pull_{size}B_udp_encrypted", exon=sealed.rate, peer=plain.rate,
                          peer_name="exon-plaintext", unit="msgs/s", higher_is_better=True,
                          messages=messages, credits=credits, **extra))
        if curve is not None:
            with _environment(CURVE_ENV, curve):
                zmq = zmq_push_pull(size, messages, "tcp")
            lines.append(emit(f"push_pull_{size}B_udp_encrypted_vs_curve", exon=sealed.rate,
                              peer=zmq.rate, peer_name="pyzmq-curve", unit="msgs/s",
                              higher_is_better=True, messages=messages, **extra))
    size = 64
    plain_rtt = exon_req_rep("-", size, round_trips, credits)
    with _environment(KEYS_ENV, keys):
        sealed_rtt = exon_req_rep("-", size, round_trips, credits)
    zlat = None
    if curve is not None:
        with _environment(CURVE_ENV, curve):
            zlat = zmq_req_rep(size, round_trips, "tcp")
    for p in (50, 99):
        ours, theirs = sealed_rtt.percentile(p), plain_rtt.percentile(p)
        lines.append(emit(f"req_rep_{size}B_p{p}_udp_encrypted", exon=ours, peer=theirs,
                          peer_name="exon-plaintext", unit="us", higher_is_better=False,
                          added_us=round(ours - theirs, 2), round_trips=round_trips, **extra))
        if zlat is not None:
            lines.append(emit(f"req_rep_{size}B_p{p}_udp_encrypted_vs_curve", exon=ours,
                              peer=zlat.percentile(p), peer_name="pyzmq-curve", unit="us",
                              higher_is_better=False, round_trips=round_trips, **extra))
    return lines
