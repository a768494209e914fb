"""Generate the parts of the user guide that are lists taken from the code.

    python tools/docgen.py           # rewrite the generated blocks in docs/guide/*.md
    python tools/docgen.py --check   # exit 1 (naming them) when a block is out of date

A generated block sits between ``<!-- docgen:NAME -->`` and ``<!-- /docgen:NAME -->``:

* ``errors``: every public exception class under :class:`exon.ExonError`, found by walking
  the package, with its bases, its docstring and what to do about it (:data:`ADVICE`; a
  class without advice is an error, so a new exception cannot go undocumented);
* ``counters``: every counter ``exon stat`` can show -- the driver's system counters from
  :class:`~exon.transport.aeron.counters.SystemCounter` (labels from the C table), the
  per-stream counter types of :class:`~exon.transport.aeron.counters.CounterType` and
  exon's node counters (:class:`~exon.transport.aeron.counters.NodeCounter`) -- with
  the group ``exon stat`` shows it in and whether it signals trouble;
* ``shm``: the ``/dev/shm`` footprint of a driver's files, computed from the defaults of
  :class:`~exon.transport.aeron.DriverSettings` and the embedded driver's overrides, and
  the CnC file's length measured on a driver launched with the defaults.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pathlib
import pkgutil
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "guide"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

#: modules that are not part of the public API (benchmarks, process entry points)
SKIP_MODULES = ("exon.bench", "exon.spark.query_main")

#: what to do about each exception (keyed by class name)
ADVICE: dict[str, str] = {
    "ExonError": "Catch it to handle every exon failure in one place; log `type(exc).__name__` "
                 "and the message, which names the object and the cause.",
    "ArgumentTypeError": "Pass the type the message names: payloads are `bytes`, `bytearray` or "
                         "`memoryview` (encode a `str` first; an `int` is never a payload), "
                         "timeouts a number of seconds or `None`. Also a `TypeError`.",
    "ConfigurationError": "Fix the argument, setting or `EXON_*` variable the message names; "
                          "retrying cannot help. Also a `ValueError`.",
    "ChannelUriError": "Fix the channel URI (`aeron:udp?endpoint=HOST:PORT`, `aeron:ipc`); the "
                       "message names the bad part.",
    "MessageTooLarge": "Split the message, or raise `max_message_size=` on the receiving socket "
                       "(the sender checks the peer's limit). Also a `ValueError`.",
    "StateError": "A call out of order: the message says which call is expected (REQ: send "
                  "then receive; REP: receive then send; PULL: confirm held batches first).",
    "ClosedError": "You closed the socket or node (or its `with` block ended): create a new one.",
    "Timeout": "Nothing happened in time: check that the peer runs and is linked, then retry "
               "or give up. Also a `TimeoutError`. A REQ whose receive timed out has abandoned "
               "the request: send again.",
    "BackPressured": "A `*_nowait` call found no credit: retry later, or call the blocking "
                     "form with a timeout; a receiver that stays slow needs more consumers.",
    "ClaimRefused": "`Publication.try_claim` found no room (`.code` says why): retry like a "
                    "refused `offer`.",
    "ProtocolError": "A peer sent bytes that break the protocol: usually another program or "
                     "version on the port. The frame was dropped; find the sender.",
    "FrameDecodeError": "As ProtocolError, for bytes that do not decode at all (short, "
                        "oversized, wrong version, unknown type).",
    "LinkRefused": "Read `.reason`: INCOMPATIBLE (wrong socket types) and UNAUTHORIZED (policy) "
                   "are permanent (`.permanent` is True): fix the code or the secret; "
                   "LINK_LIMIT is temporary: retry later.",
    "BrokenLink": "The peer node died or the link timed out: cookies of unconfirmed messages "
                  "come back as `CookieLost`. Link again once the peer is back; resend what "
                  "matters (at-least-once).",
    "SocketNotFound": "The peer node runs but has no socket with that tag (yet): check the tag, "
                      "or open the socket before linking to it.",
    "SocketNotLinked": "A send to a destination this socket has no link with: link first; "
                       "after a broken link, link again.",
    "TransportError": "The Aeron transport failed: the subclasses say where. Check the driver "
                      "(`exon stat`) and `/dev/shm`.",
    "DriverError": "The driver refused a command: the message is the driver's reason (bad "
                   "channel, port in use, no space for a log buffer).",
    "DriverTimeout": "The media driver stopped answering: restart it (systemd does) and "
                     "recreate the nodes that used it; `exon stat` shows its heartbeat age.",
    "DriverUnavailable": "`Node(driver=\"shared\")` found no live host driver: start "
                         "`exon driver` (or its systemd unit), or use `driver=\"auto\"` / "
                         "`\"embedded\"`.",
    "CncError": "No driver at that directory, or a stale or foreign `cnc.dat`: start `exon "
                "driver --dir DIR` or point `driver_dir` / `EXON_NODE_DRIVER_DIR` at it.",
    "LogBufferError": "A log buffer file is truncated or inconsistent: usually `/dev/shm` ran "
                      "full or someone deleted files under a running driver. Free space, "
                      "restart the driver.",
    "ResourceExhausted": "A fixed table (counters, doorbells, links) is full: close unused "
                         "sockets and publications, or give the driver more counters "
                         "(`counters_values_buffer_length`).",
    "EncryptionUnavailable": "Encryption was asked for where it cannot work: the message "
                             "names what is missing (OpenSSL 3's `libcrypto.so.3`); install "
                             "it, or use plaintext links on a trusted network.",
    "KeyFileError": "A key file that cannot be used: `chmod 600` it (make a new keypair if "
                    "others may have read it), or regenerate it with `exon keygen`.",
    "HandshakeError": "A handshake message of an encrypted link did not read (cut, altered, "
                      "or from a peer with other keys): the link is refused UNAUTHORIZED.",
    "NativeOSError": "A system call failed; `.errno` says which error (e.g. ENOSPC: "
                     "`/dev/shm` is full, EADDRINUSE: the port is taken).",
    "ArchiveError": "The archive could not do what was asked; the message says what and why.",
    "RecordingNotFound": "No recording by that name or id: list them (`exon archive list`). "
                         "Also a `KeyError`.",
    "ReplayRangeError": "Replay or truncate from a position that is not a record boundary or "
                        "lies outside the recording: use positions from `Record.position` or "
                        "`RecordingInfo`.",
    "ArchiveCorrupt": "A check failed at `.path`, `.offset`: run `exon archive verify`; a torn "
                      "tail is cut at the next start, other damage needs the file restored.",
    "ArchiveLocked": "Another archive service owns the directory: stop it, or use another "
                     "directory.",
    "ArchiveFull": "Writing failed (disk full, I/O error): recording stopped and nothing "
                   "unconfirmed was acknowledged; free space and restart the service. "
                   "Also an `OSError`.",
    "ControlError": "A control message the archive could not decode: client and service "
                    "versions differ.",
    "ReplayFailed": "A Spark task could not replay its range within `replayTimeout`: check "
                    "that the archive runs; Spark retries the task.",
    "IndexBuilding": "A first `position_at` on a long recording while its time index is "
                     "built: ask again (`ArchiveClient.position_at` does, up to its `wait`).",
    "DataLossError": "Records the query was to read were truncated from the archive first "
                     "(`.recording`, `.start`, `.end`): restore them, or set "
                     "`failOnDataLoss=false` to skip such ranges with a warning.",
    "ExonOptionError": "An option of `format(\"exon\")` is missing or invalid; `.option` "
                       "names it.",
    "SinkError": "A Spark task got no confirmation for its rows; the batch fails and Spark "
                 "retries it (at-least-once to a PULL, exactly-once into a recording).",
}


def public_exceptions() -> list[type[BaseException]]:
    """Every exception class under ExonError defined in exon's public modules, in
    hierarchy order (parents first)."""
    import exon
    from exon.errors import ExonError

    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(exon.__path__, "exon."):
        if info.name.startswith(SKIP_MODULES) or info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra is missing
            continue
        for name, obj in vars(module).items():
            if (inspect.isclass(obj) and issubclass(obj, ExonError) and not name.startswith("_")
                    and obj.__module__ == module.__name__ and obj.__name__ == name):
                found[f"{obj.__module__}.{name}"] = obj

    def depth(cls: type) -> int:
        return len([c for c in cls.__mro__ if issubclass(c, ExonError)])

    return sorted(found.values(), key=lambda c: (c.__module__ != "exon.errors", c.__module__,
                                                 depth(c), c.__name__))


def _public_path(cls: type) -> str:
    import exon

    if getattr(exon, cls.__name__, None) is cls:
        return f"exon.{cls.__name__}"
    package = cls.__module__.rsplit(".", 1)[0]
    if getattr(importlib.import_module(package), cls.__name__, None) is cls:
        return f"{package}.{cls.__name__}"
    return f"{cls.__module__}.{cls.__name__}"


def _first_line(doc: str | None) -> str:
    text = " ".join((doc or "").strip().split("\n\n")[0].split())
    return re.sub(r":(?:class|meth|attr|func|data):`~?([^`]+)`", r"`\1`", text)


def errors_block() -> str:
    classes = public_exceptions()
    missing = [c.__name__ for c in classes if c.__name__ not in ADVICE]
    if missing:
        raise SystemExit(f"docgen: no advice for {', '.join(missing)} (add it to ADVICE)")
    rows = ["| Exception | Is a | Raised when | What to do |", "| --- | --- | --- | --- |"]
    for cls in classes:
        bases = ", ".join(f"`{b.__name__}`" for b in cls.__bases__)
        rows.append(f"| `{_public_path(cls)}` | {bases} | {_first_line(cls.__doc__)} | "
                    f"{ADVICE[cls.__name__]} |")
    return "\n".join(rows)


#: group (as ``exon stat`` shows it), trouble?, meaning -- per system counter name
SYSTEM_COUNTERS: dict[str, tuple[str, bool, str]] = {
    "BYTES_SENT": ("traffic", False, "UDP bytes the sender put on the wire (data, "
                   "heartbeats, setups, retransmits)."),
    "BYTES_RECEIVED": ("traffic", False, "UDP bytes the receiver took off the wire."),
    "STATUS_MESSAGES_SENT": ("traffic", False, "Status messages (window grants) sent to "
                             "publishers."),
    "STATUS_MESSAGES_RECEIVED": ("traffic", False, "Status messages received from "
                                 "subscribers."),
    "HEARTBEATS_SENT": ("traffic", False, "Heartbeats: empty data frames an idle publication "
                        "sends."),
    "HEARTBEATS_RECEIVED": ("traffic", False, "Heartbeats received."),
    "NAK_MESSAGES_SENT": ("loss", True, "NAKs: this receiver saw a gap and asked for a "
                          "retransmit. Rising steadily: loss on the path."),
    "NAK_MESSAGES_RECEIVED": ("loss", True, "NAKs from remote receivers: they lose what this "
                              "host sends."),
    "RETRANSMITS_SENT": ("loss", True, "Data sent again after a NAK."),
    "LOSS_GAP_FILLS": ("loss", True, "Gaps given up on and filled with padding: data was "
                       "LOST for a subscriber (the exon link then breaks)."),
    "NAKS_SUPPRESSED": ("loss", True, "NAKs withheld: the source is not verified yet, or the "
                        "NAK rate cap was reached (a gap that keeps coming back)."),
    "FLOW_CONTROL_UNDER_RUNS": ("flow control", True, "Status messages behind the sender's "
                                "position (reordered or stale)."),
    "FLOW_CONTROL_OVER_RUNS": ("flow control", True, "Data beyond the receiver's window: a "
                               "misbehaving sender."),
    "SENDER_FLOW_CONTROL_LIMITS": ("flow control", False, "Times a sender stopped at the "
                                   "receiver's window. Normal under load; steady growth with "
                                   "slow consumers."),
    "BACK_PRESSURE_EVENTS": ("flow control", False, "Offers refused because the publication "
                             "window was full (the publisher waits for its consumers)."),
    "INVALID_PACKETS": ("drops", True, "Datagrams dropped as malformed, unknown or from an "
                        "unsupported version: another program on the port, or an attack."),
    "SETUPS_DROPPED": ("drops", True, "SETUPs refused because the endpoint's image table is "
                       "full: too many senders, or a SETUP flood."),
    "IMAGES_EVICTED": ("drops", True, "Images dropped to make room in a full endpoint table "
                       "(unverified sources first, then idle ones): many senders, or a SETUP "
                       "flood."),
    "SHORT_SENDS": ("drops", True, "`sendmsg` sent fewer bytes than asked: the socket send "
                    "buffer is too small."),
    "RECEIVER_PROXY_FAILS": ("drops", True, "Commands to the receiver agent lost to a full "
                             "queue: the driver is overloaded."),
    "SENDER_PROXY_FAILS": ("drops", True, "Commands to the sender agent lost to a full queue."),
    "CONDUCTOR_PROXY_FAILS": ("drops", True, "Commands to the conductor lost to a full queue."),
    "POSSIBLE_TTL_ASYMMETRY": ("drops", True, "Status messages from a receiver the data may "
                               "not reach (multicast TTL); unusual in unicast."),
    "ERRORS": ("health", True, "Distinct errors logged by the driver: `exon stat` lists them "
                               "under the counters."),
    "CLIENT_TIMEOUTS": ("health", True, "Clients (nodes) the driver declared dead: they "
                        "stopped heart-beating (crashed or stalled longer than "
                        "`client_liveness_timeout_ns`)."),
    "FREE_FAILS": ("health", True, "Log buffers that could not be deleted (permissions, "
                   "files held)."),
    "UNBLOCKED_PUBLICATIONS": ("health", True, "Publications unblocked after a publisher died "
                               "mid-message."),
    "UNBLOCKED_COMMANDS": ("health", True, "Client commands unblocked after a client died "
                           "mid-command."),
    "UDP_GSO_FALLBACKS": ("health", True, "UDP publications whose GSO send the kernel or the "
                          "network device refused: they send one datagram per message from "
                          "then on (slower, same wire). See the tuning guide's offload "
                          "section."),
    "CONTROLLABLE_IDLE_STRATEGY": ("health", False, "Status of a controllable idle strategy "
                                   "(Aeron's; 0 here)."),
    "DOORBELL_WAKES": ("health", False, "Times the driver woke a parked client (a node "
                       "sleeping in `receive`) instead of letting it poll."),
}

#: per-stream counter types: group, meaning
STREAM_COUNTERS: dict[str, tuple[str, str]] = {
    "SYSTEM": ("", ""),
    "PUBLISHER_LIMIT": ("publications", "How far the publisher may write (`pub-lmt`); "
                        "`pub-lmt - pub-pos` is the room left before back pressure."),
    "PUBLISHER_POSITION": ("publications", "Bytes the publisher has written (`pub-pos`)."),
    "SENDER_POSITION": ("publications", "Bytes the sender has put on the wire (`snd-pos`)."),
    "SENDER_LIMIT": ("publications", "How far the receivers' window lets the sender go "
                     "(`snd-lmt`)."),
    "SENDER_BPE": ("publications", "Times this sender was held at `snd-lmt` (`snd-bpe`)."),
    "RECEIVER_HWM": ("images", "Highest position received for an image (`rcv-hwm`); above "
                     "`rcv-pos` means a gap waits for a retransmit."),
    "RECEIVER_POSITION": ("images", "Contiguous bytes received (`rcv-pos`)."),
    "SUBSCRIBER_POSITION": ("images", "Bytes the subscriber (the node) has consumed "
                            "(`sub-pos`); `rcv-pos - sub-pos` is the lag."),
    "RECEIVER_RTT": ("images", "Last round trip measured for the image, in nanoseconds "
                     "(`rcv-rtt`)."),
    "RECEIVER_HEARD": ("images", "When the image last heard its source (any packet, "
                       "heartbeats included), epoch milliseconds, in 10 ms steps; only for "
                       "images whose source proved real (verified)."),
    "SEND_CHANNEL_STATUS": ("channels", "State of a send channel endpoint (1 active)."),
    "RECEIVE_CHANNEL_STATUS": ("channels", "State of a receive channel endpoint (1 active)."),
    "CLIENT_HEARTBEAT": ("clients", "Last heartbeat time of a client (ms since the epoch): a "
                         "node's Aeron client."),
    "DOORBELL": ("clients", "Wake-ups rung on a subscription's doorbell (a parked reader)."),
}


#: exon's node counters: trouble?, meaning
NODE_COUNTERS: dict[str, tuple[bool, str]] = {
    "LINKS": (False, "Links established now, over all the node's sockets (established "
              "minus closed)."),
    "FRAMES_RECEIVED": (False, "exon frames that reached the node's core: handshakes, "
                        "errors, and the DATA and FLOW the native fast path did not take."),
    "FRAMES_SENT": (False, "exon frames the node's core sent (the native fast path's DATA "
                    "and FLOW not included)."),
    "MALFORMED_DROPPED": (True, "Frames that did not decode: another program or version "
                          "on the node's stream, or an attack."),
    "STALE_DROPPED": (True, "Frames of an older incarnation of a link (a restarted peer's "
                      "leftovers); a few after a relink are normal."),
    "IGNORED": (False, "ERROR frames for sockets this node does not have."),
    "NOT_FOUND_SENT": (True, "SOCKET_NOT_FOUND answers: peers address a tag with no socket "
                       "here."),
    "NOT_LINKED_SENT": (True, "SOCKET_NOT_LINKED answers: peers send on a link this node "
                        "does not know (it restarted, or closed the link)."),
    "CREDIT_VIOLATIONS": (True, "DATA beyond the credit this node granted: a misbehaving "
                          "peer."),
    "OVERSIZE_DROPPED": (True, "DATA larger than the receiving socket's "
                         "`max_message_size`."),
    "REFUSALS_SENT": (False, "LINKs this node refused (incompatible, unauthorized, limit, "
                      "relink)."),
    "REFUSALS_RECEIVED": (True, "LINKs of this node that peers refused."),
    "RETRIES": (False, "Link handshakes retried after a temporary refusal."),
    "LINKS_ESTABLISHED": (False, "Links established since the node started."),
    "LINKS_CLOSED": (False, "Links closed or broken since the node started."),
    "COOKIES_RETURNED": (False, "Cookies confirmed to senders (their message was "
                         "delivered)."),
    "COOKIES_LOST": (True, "Cookies of messages whose delivery cannot be confirmed (a "
                     "broken link): resend what matters."),
    "RELINKS_REFUSED": (True, "LINKs that would have replaced a live link from another "
                        "stream (a restarted peer before its old stream died, or a "
                        "forged LINK)."),
    "FRAMES_DROPPED": (True, "Frames for peer nodes that could not be reached (no answer "
                       "within the connect timeout)."),
    "CONNECTS_FAILED": (True, "Peer nodes that did not answer within the connect timeout."),
    "LINKS_RESENT": (False, "LINKs repeated because they went unanswered, and LINKACKs "
                     "repeated for a repeated LINK (a peer that restarted, or loss)."),
    "UNOPENED_DROPPED": (True, "Frames of encrypted links that did not open: altered, "
                         "truncated, injected, replayed, sealed for another link, or "
                         "plaintext where the link is sealed (someone tampers with the "
                         "path, or a peer has a bug). Never delivered; the link goes on."),
    "FRAGMENTS_DROPPED": (True, "FRAGMENTs (pieces of a message longer than the transport's "
                          "largest) thrown away: malformed, out of order, above the node's "
                          "largest `max_message_size`, or of a message left unfinished by "
                          "a peer node that went away."),
    "TOKENS_REJECTED": (True, "LINKACKs dropped because they did not echo the token this "
                        "node put in its LINKACK: a peer that has not shown it receives "
                        "at the reply address it named (protocol 2.6.1)."),
    "UNVALIDATED_DROPPED": (True, "DATA/FLOW of a link whose peer never echoed the token: "
                            "held until the echo, then dropped with the record or beyond "
                            "the credit granted."),
    "AMPLIFICATION_HELD": (True, "Frames not sent to an address that is not validated, "
                           "because they would pass 3x the bytes received in its name."),
    "AMPLIFICATION_HELD_BYTES": (True, "The bytes of those frames."),
}


def counters_block() -> str:
    from exon.transport.aeron.counters import CounterType, NodeCounter, SystemCounter

    missing = [m.name for m in SystemCounter if m.name not in SYSTEM_COUNTERS]
    missing += [m.name for m in CounterType if m.name not in STREAM_COUNTERS]
    missing += [m.name for m in NodeCounter if m.name not in NODE_COUNTERS]
    if missing:
        raise SystemExit(f"docgen: no description for counters {', '.join(missing)}")
    rows = ["System counters (one each per driver, ids fixed):", "",
            "| Id | Label in `exon stat` | Group | Trouble? | Meaning |",
            "| --- | --- | --- | --- | --- |"]
    from exon.transport.aeron.stat import SYSTEM_GROUPS

    for m in SystemCounter:
        _, trouble, meaning = SYSTEM_COUNTERS[m.name]
        group = SYSTEM_GROUPS.get(m, "other")  # the group exon stat shows it in
        rows.append(f"| {int(m)} | {m.label} | {group} | {'yes, when it rises' if trouble else ''}"
                    f" | {meaning} |")
    rows += ["", "Counters per stream (one per publication, image or client; the label says "
             "which):", "", "| Type id | Short name | Group | Meaning |",
             "| --- | --- | --- | --- |"]
    for t in CounterType:
        if t is CounterType.SYSTEM:
            continue
        group, meaning = STREAM_COUNTERS[t.name]
        rows.append(f"| {int(t)} | `{t.short_name}` | {group} | {meaning} |")
    rows += ["", "exon's node counters (one per statistic and node, group `exon`; the label is "
             "`exon WHAT: node NODE_ID ADDRESS`, the key the node id's 16 bytes, "
             "`nodes[].counters.NAME` in `--json`; NAME is also the field of "
             "`node.statistics()`, or for `frames_dropped`, `connects_failed` and "
             "`fragments_dropped` the Node's attribute):", "",
             "| Type id | WHAT (label) | NAME | Trouble? | Meaning |",
             "| --- | --- | --- | --- | --- |"]
    for m in NodeCounter:
        trouble, meaning = NODE_COUNTERS[m.name]
        rows.append(f"| {int(m)} | `{m.what}` | `{m.name.lower()}` | "
                    f"{'yes, when it rises' if trouble else ''} | {meaning} |")
    return "\n".join(rows)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB ({n:,} B)"


def _terms(host: int, embedded: int) -> str:
    if host == embedded:
        return f"{host >> 20} MiB"
    return f"{host >> 20} MiB / {embedded >> 20} MiB"


def shm_block() -> str:
    from exon.middleware.node import EMBEDDED_DRIVER_DEFAULTS
    from exon.transport.aeron import MediaDriver
    from exon.transport.aeron.layout import log_length
    from exon.transport.aeron.settings import DriverSettings

    host = DriverSettings(dir="/unused")
    embedded = DriverSettings(dir="/unused", **EMBEDDED_DRIVER_DEFAULTS)
    base = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=base) as d, \
            MediaDriver.launch(DriverSettings(dir=os.path.join(d, "driver"))) as driver:
        cnc = os.path.getsize(os.path.join(driver.dir, "cnc.dat"))

    def row(what: str, h: int, e: int) -> str:
        return f"| {what} | 3 x term + 4 KiB | {_mib(h)} | {_mib(e)} |"

    ipc_h = log_length(host.ipc_term_buffer_length, host.file_page_size)
    ipc_e = log_length(embedded.ipc_term_buffer_length, embedded.file_page_size)
    udp_h = log_length(host.term_buffer_length, host.file_page_size)
    udp_e = log_length(embedded.term_buffer_length, embedded.file_page_size)
    ipc_terms = _terms(host.ipc_term_buffer_length, embedded.ipc_term_buffer_length)
    udp_terms = _terms(host.term_buffer_length, embedded.term_buffer_length)
    lines = [
        "| File | Size | `exon driver` (defaults) | embedded driver (a Node's) |",
        "| --- | --- | --- | --- |",
        f"| `cnc.dat` (rings, counters, error log; measured) | fixed | {_mib(cnc)} | "
        f"{_mib(cnc)} |",
        row("IPC log: per ordered pair of nodes on the same driver (`ipc_term_buffer_length` "
            f"{ipc_terms})", ipc_h, ipc_e),
        row("UDP publication log: per peer node on another driver this node sends to "
            f"(`term_buffer_length` {udp_terms})", udp_h, udp_e),
        row("UDP image log: per node on another driver sending to this one (the sender's "
            "term length)", udp_h, udp_e),
    ]
    n, r = 4, 2

    def example(ipc: int, udp: int) -> int:
        return cnc + n * (n - 1) * ipc + n * r * 2 * udp

    aeron_ipc = log_length(64 << 20, host.file_page_size)
    aeron_udp = log_length(16 << 20, host.file_page_size)
    lines += ["", f"Worked example, `exon driver` with its defaults: {n} nodes on the host, "
              f"all linked with each other, and each linked with {r} nodes on other hosts: "
              f"`cnc.dat` + {n}x{n - 1} IPC logs + {n}x{r} UDP publication logs + {n}x{r} "
              f"image logs = **{_mib(example(ipc_h, udp_h))}**. With Aeron's terms "
              f"(`EXON_IPC_TERM_BUFFER_LENGTH=64m EXON_TERM_BUFFER_LENGTH=16m`) it would be "
              f"**{_mib(example(aeron_ipc, aeron_udp))}**."]
    return "\n".join(lines)


BLOCKS = {"errors": errors_block, "counters": counters_block, "shm": shm_block}
_BLOCK = re.compile(r"(<!-- docgen:(\w+) -->\n)(.*?)(<!-- /docgen:\2 -->)", re.DOTALL)


def render(text: str, cache: dict[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in cache:
            cache[name] = BLOCKS[name]()
        return f"{match.group(1)}{cache[name]}\n{match.group(4)}"

    return _BLOCK.sub(replace, text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report stale blocks")
    args = parser.parse_args(argv)
    cache: dict[str, str] = {}
    stale = []
    for page in sorted(GUIDE.glob("*.md")):
        text = page.read_text()
        new = render(text, cache)
        if new != text:
            stale.append(page.relative_to(ROOT))
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        print("out of date (run python tools/docgen.py):", *stale, file=sys.stderr)
        return 1
    for page in stale:
        print(f"rewrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
