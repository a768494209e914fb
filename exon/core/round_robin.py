"""The round-robin rule of the sending sockets (PUSH, REQ, DEALER): which link goes next.

Links keep the order they were established in; a cursor names the link to try first. The
first link with credit at or after the cursor (wrapping round) takes the message, and the
cursor moves to the link after it. The native link table applies the same rule to the
links it holds (``exon_lt_send`` in exon_link_table.c, over each socket's ring); a parity
test runs both on the same random credit (tests/middleware/test_rule_parity.py).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["pick_round_robin"]


def pick_round_robin(count: int, cursor: int,
                     has_credit: Callable[[int], bool]) -> tuple[int, int] | None:
    """Of ``count`` links in order, the first for which ``has_credit(index)`` holds at or
    after ``cursor`` (wrapping): ``(index, next cursor)``; None when none has credit."""
    for step in range(count):
        index = (cursor + step) % count
        if has_credit(index):
            return index, (index + 1) % count
    return None
