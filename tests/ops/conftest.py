from __future__ import annotations

from tests.sockets.helpers import driver, make_node  # noqa: F401
