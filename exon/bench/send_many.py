"""``exon bench sockets --send-many B``: PUSH.send_many against one send per message.

Each round runs the same push/pull twice, in turns (the order alternates between rounds, so
a drift of the shared machine falls on both): the PUSH sends ``messages`` payloads with
``send_many`` of ``B`` at a time, or with one ``send`` per message; the PULL is the same in
both (``receive_held(B)`` + ``confirm``, the receive path that costs no Python step per
message, as the archive's ingest uses), both nodes on one media driver (IPC), one process
each. Two lines per size, medians of the rounds and each round's figures:

* ``push_pull_{size}B_send_many``: messages/s at the PULL, first to last message;
* ``push_{size}B_send_many_sender``: messages/s of the PUSH's own calls (first call to the
  last one's return); paced by the PULL and the credits, so close to the line above;
* ``push_{size}B_send_many_sender_cpu``: the PUSH process's CPU time per message (µs, lower
  is better) over the same span: the producer's own cost, which a loaded machine blurs
  less than a rate (it includes the CPU the sender spends waiting for credit).

* ``push_{size}B_send_many_burst``: messages/s of the PUSH's calls alone when each call
  of B messages starts only once the link has credit for all of them (a run of its own:
  the sender waits, untimed, for credit before each call): the producer's own cost with
  no wait in it, the figure a loaded machine blurs least.

Ratio = send_many / one send per message: > 1 means the batch is faster.
"""

from __future__ import annotations

import contextlib
import shutil
import statistics

from exon.bench.report import emit
from exon.bench.sockets import _DRIVER, _worker_pair
from exon.transport.aeron.settings import fresh_driver_dir

__all__ = ["burst_rate", "push_pull_rates", "run_send_many_bench"]


def push_pull_rates(driver_dir: str, size: int, messages: int, credits: int, batch: int,
                    *, many: bool) -> tuple[float, float, float]:
    """(PULL msgs/s, PUSH msgs/s, PUSH CPU µs a message) of one run: send_many (``many``)
    or one send each."""
    role = "push-many" if many else "push-each"
    with _worker_pair(("pull-held", driver_dir, str(messages), str(credits), str(batch)),
                      (role, driver_dir, str(messages), str(size), str(batch))) as (pull, push):
        pull_out, _ = pull.communicate(timeout=600)
        push_out, _ = push.communicate(timeout=120)
        if pull.returncode or push.returncode:
            raise RuntimeError(f"a bench worker failed (pull {pull.returncode}, "
                               f"push {push.returncode})")
        received = float(pull_out.strip().splitlines()[-1])
        sending, cpu = (float(x) for x in push_out.strip().splitlines()[-1].split())
        return messages / received, messages / sending, 1e6 * cpu / messages


def burst_rate(driver_dir: str, size: int, messages: int, credits: int, batch: int,
               *, many: bool) -> float:
    """Messages/s of the PUSH's calls alone, each started with credit for all of it."""
    role = "push-many-burst" if many else "push-each-burst"
    with _worker_pair(("pull-held", driver_dir, str(messages), str(credits), str(batch)),
                      (role, driver_dir, str(messages), str(size), str(batch))) as (pull, push):
        pull.communicate(timeout=600)
        push_out, _ = push.communicate(timeout=120)
        if pull.returncode or push.returncode:
            raise RuntimeError(f"a bench worker failed (pull {pull.returncode}, "
                               f"push {push.returncode})")
        seconds, timed = push_out.strip().splitlines()[-1].split()
        return int(timed) / float(seconds)


def run_send_many_bench(*, batch: int, sizes: tuple[int, ...] = (64, 1024),
                        messages: int = 200_000, credits: int | None = None,
                        runs: int = 3) -> list[dict[str, object]]:
    from exon.transport.aeron import MediaDriver

    if credits is None:
        from exon.core import LinkSettings

        credits = LinkSettings().initial_credits
    if batch > credits:
        raise ValueError(f"--send-many {batch} exceeds the PULL's credits ({credits}): the "
                         "burst run could never start a call with credit for all of it")
    directory = fresh_driver_dir("exon-bench-send-many")
    lines = []
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(MediaDriver.launch(dir=directory, **_DRIVER))
            for size in sizes:
                rates: dict[bool, list[tuple[float, ...]]] = {True: [], False: []}
                for round_ in range(runs):
                    for many in ((True, False) if round_ % 2 == 0 else (False, True)):
                        rates[many].append((
                            *push_pull_rates(directory, size, messages, credits, batch,
                                             many=many),
                            burst_rate(directory, size, messages, credits, batch,
                                       many=many)))
                common = {"messages": messages, "credits": credits, "batch": batch,
                          "runs": runs, "receiver": f"receive_held({batch})"}
                for index, case, unit in ((0, f"push_pull_{size}B_send_many", "msgs/s"),
                                          (1, f"push_{size}B_send_many_sender", "msgs/s"),
                                          (2, f"push_{size}B_send_many_sender_cpu", "us"),
                                          (3, f"push_{size}B_send_many_burst", "msgs/s")):
                    many_runs = [r[index] for r in rates[True]]
                    each_runs = [r[index] for r in rates[False]]
                    def rounded(r: float, unit: str = unit) -> float:
                        return round(r, 3) if unit == "us" else round(r)

                    lines.append(emit(
                        case, exon=statistics.median(many_runs),
                        peer=statistics.median(each_runs), peer_name="send-per-message",
                        unit=unit, higher_is_better=unit != "us",
                        send_many_runs=[rounded(r) for r in many_runs],
                        per_message_runs=[rounded(r) for r in each_runs], **common))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return lines
