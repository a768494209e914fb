"""A miniature driver conductor around the sender and receiver agents, for tests.

It plays H3's part: creates the publication log and the image logs, raises the
publication limit from snd-pos (cleaning the log first), creates images from SETUPs and
reads them with the client-side image reader. Real UDP on 127.0.0.1, real clock.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

from exon.native import check, ffi, lib

TERM_LENGTH = 64 * 1024
MTU = 1408
STREAM = 1001


def make_log(path: str, *, term_length: int, mtu: int, initial_term_id: int, session_id: int,
             stream_id: int, log_type: int) -> Any:
    log = ffi.new("exon_log_t *")
    params = ffi.new("exon_log_params_t *")
    params.term_length = term_length
    params.mtu = mtu
    params.initial_term_id = initial_term_id
    params.session_id = session_id
    params.stream_id = stream_id
    params.type = log_type
    check(lib.exon_log_create(log, path.encode(), params), path)
    return log


def open_channel(so_rcvbuf: int = 2 * 1024 * 1024) -> Any:
    addr = ffi.new("exon_udp_addr_t *")
    check(lib.exon_udp_addr_resolve(addr, b"127.0.0.1", 0))
    ch = ffi.new("exon_udp_channel_t *")
    check(lib.exon_udp_channel_open(ch, addr, so_rcvbuf, 0))
    return ch


def addr_of(port: int) -> Any:
    addr = ffi.new("exon_udp_addr_t *")
    check(lib.exon_udp_addr_resolve(addr, b"127.0.0.1", port))
    return addr


@dataclass
class ReceiverSide:
    directory: str
    loss_rate: float = 0.0
    loss_seed: int = 42
    image_params: Any = None
    channel: Any = field(init=False)
    agent: Any = field(init=False)
    images: list[tuple[Any, Any, Any, Any]] = field(default_factory=list)  # net, log, img, pos
    removed: list[Any] = field(default_factory=list)
    messages: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.channel = open_channel()
        self.agent = ffi.new("exon_receiver_agent_t *")
        check(lib.exon_receiver_agent_init(self.agent, self.channel, self.loss_rate,
                                           self.loss_seed))
        check(lib.exon_receiver_agent_subscribe(self.agent, STREAM))
        self._req = ffi.new("exon_setup_request_t *")
        self._frags = ffi.new("exon_fragment_t[]", 64)
        self._copy = ffi.new("uint8_t[]", 1 << 20)
        self._used = ffi.new("int32_t *")
        self._out = ffi.new("exon_net_image_t **")

    @property
    def port(self) -> int:
        return int(lib.exon_udp_channel_local_port(self.channel))

    def step(self, now: int) -> int:
        work = check(lib.exon_receiver_agent_do_work(self.agent, now))
        while lib.exon_receiver_agent_take_setup(self.agent, self._req):
            s = self._req.setup
            path = os.path.join(self.directory, f"image-{s.session_id}-{len(self.images)}.log")
            log = make_log(path, term_length=s.term_length, mtu=s.mtu,
                           initial_term_id=s.initial_term_id, session_id=s.session_id,
                           stream_id=s.stream_id, log_type=2)
            net = ffi.new("exon_net_image_t *")
            check(lib.exon_net_image_init(net, log, self.channel,
                                          ffi.addressof(self._req, "source"),
                                          ffi.addressof(self._req, "setup"),
                                          random.getrandbits(63),
                                          self.image_params or ffi.NULL, now))
            pos = ffi.new("int64_t *", net.join_position)
            img = ffi.new("exon_image_t *")
            check(lib.exon_image_init(img, log, pos, ffi.NULL))
            net.consumer_position = pos
            check(lib.exon_receiver_agent_add_image(self.agent, net))
            self.images.append((net, log, img, pos))
        while lib.exon_receiver_agent_take_removed(self.agent, self._out):
            self.removed.append(self._out[0])
        for _net, _log, img, _pos in self.images:
            n = lib.exon_image_poll(img, self._frags, 64, 64, self._copy, 1 << 20, self._used)
            for f in self._frags[0:max(n, 0)]:
                self.messages.append(bytes(ffi.buffer(self._copy + f.offset, f.length)))
            work += max(n, 0)
        return work

    def close(self) -> None:
        lib.exon_receiver_agent_fini(self.agent)
        lib.exon_udp_channel_close(self.channel)
        for _net, log, img, _pos in self.images:
            lib.exon_image_close(img)
            lib.exon_log_close(log)


@dataclass
class SenderSide:
    directory: str
    destination_port: int
    params: Any = None
    session_id: int = 4242
    initial_term_id: int = 1000
    channel: Any = field(init=False)
    log: Any = field(init=False)
    pub: Any = field(init=False)
    net: Any = field(init=False)
    agent: Any = field(init=False)

    def __post_init__(self) -> None:
        self.channel = open_channel()
        path = os.path.join(self.directory, "publication.log")
        self.log = make_log(path, term_length=TERM_LENGTH, mtu=MTU,
                            initial_term_id=self.initial_term_id, session_id=self.session_id,
                            stream_id=STREAM, log_type=1)
        self.limit = ffi.new("int64_t *", 0)
        self.clean = ffi.new("int64_t *", 0)
        self.pub = ffi.new("exon_publication_t *")
        check(lib.exon_publication_init(self.pub, self.log, self.limit, ffi.NULL, 1))
        self.net = ffi.new("exon_net_publication_t *")
        check(lib.exon_net_publication_init(self.net, self.log, self.channel,
                                            addr_of(self.destination_port), self.params or ffi.NULL,
                                            lib.exon_nano_clock_ns()))
        self.agent = ffi.new("exon_sender_agent_t *")
        lib.exon_sender_agent_init(self.agent)
        check(lib.exon_sender_agent_add(self.agent, self.net))

    def step(self, now: int) -> int:
        work = check(lib.exon_sender_agent_do_work(self.agent, now))
        snd = self.net.sender_position
        lib.exon_log_clean_to(self.log, self.clean, snd - TERM_LENGTH)
        self.limit[0] = snd + TERM_LENGTH // 2  # the conductor's pub-lmt
        return work

    def offer(self, data: bytes) -> int:
        return int(lib.exon_publication_offer(self.pub, data, len(data), 0))

    def close(self) -> None:
        lib.exon_udp_channel_close(self.channel)
        lib.exon_log_close(self.log)
