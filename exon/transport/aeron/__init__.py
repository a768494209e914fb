"""exon's Aeron transport: media driver, client, publications, subscriptions, images.

Embedded driver and client in one process::

    with MediaDriver.launch(dir="/dev/shm/exon-demo") as driver, \\
            Aeron.connect(driver.dir) as aeron:
        sub = aeron.add_subscription("aeron:ipc", 10)
        pub = aeron.add_publication("aeron:ipc", 10)
        pub.offer(b"hello")
        sub.wait(1.0)
        sub.poll(lambda data, header: print(bytes(data)), 10)
"""

from __future__ import annotations

from exon.transport.aeron.client import Aeron, ClientCounter, Subscription
from exon.transport.aeron.driver import MediaDriver
from exon.transport.aeron.image import Image
from exon.transport.aeron.publication import (
    ADMIN_ACTION,
    BACK_PRESSURED,
    CLOSED,
    MAX_POSITION_EXCEEDED,
    NOT_CONNECTED,
    ExclusivePublication,
    Publication,
)
from exon.transport.aeron.settings import DriverSettings

__all__ = [
    "ADMIN_ACTION",
    "BACK_PRESSURED",
    "CLOSED",
    "MAX_POSITION_EXCEEDED",
    "NOT_CONNECTED",
    "Aeron",
    "ClientCounter",
    "DriverSettings",
    "ExclusivePublication",
    "Image",
    "MediaDriver",
    "Publication",
    "Subscription",
]
