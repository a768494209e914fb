"""Facts about the machine a bench runs on that its figures depend on (read from sysfs)."""

from __future__ import annotations

import os

#: where Linux lists virtio devices
VIRTIO_DEVICES = "/sys/bus/virtio/devices"
#: the virtio device id of a memory balloon
BALLOON_DEVICE_ID = 5
#: VIRTIO_BALLOON_F_REPORTING: the guest hands free pages back to the host
REPORTING_FEATURE_BIT = 5


def free_page_reporting(devices: str = VIRTIO_DEVICES) -> bool | None:
    """Whether this machine is a VM whose memory balloon reports free pages to its host:
    True or False with a virtio balloon, None without one (or no sysfs to tell).

    Where it does, a page the guest freed is given back to the host a moment later, and
    the guest's next first touch of it waits for the host to supply it again. Writes
    into fresh page-cache pages (a recording, a file write loop) then run several times
    slower than on pages freed just before, so record figures vary with what the
    machine freed last; copies between buffers that are reused (push/pull) do not."""
    try:
        names = sorted(os.listdir(devices))
    except OSError:
        return None
    found: bool | None = None
    for name in names:
        try:
            with open(os.path.join(devices, name, "device")) as f:
                if int(f.read().strip(), 16) != BALLOON_DEVICE_ID:
                    continue
            with open(os.path.join(devices, name, "features")) as f:
                bits = f.read().strip()
        except (OSError, ValueError):
            continue
        # sysfs prints the feature bits lowest first, one character each
        found = bool(found) or (len(bits) > REPORTING_FEATURE_BIT
                                and bits[REPORTING_FEATURE_BIT] == "1")
    return found
