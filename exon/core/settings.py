"""Link settings: credits, FLOW batching, retry back-off, unlink timeout (seconds)."""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field


class LinkSettings(BaseModel):
    """Validated, immutable link settings shared by every socket of a core."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    initial_credits: int = Field(1024, ge=1, le=1 << 20, description="default per-link credits")
    grant_batch_fraction: float = Field(
        0.125, gt=0.0, le=1.0, description="send FLOW after this fraction of credits delivered"
    )
    flow_delay: float = Field(
        0.005, ge=0.0, le=10.0, description="max seconds a delivery waits before its FLOW"
    )
    max_message_size: int = Field(1 << 20, ge=1, le=1 << 30)
    retry_initial: float = Field(0.05, gt=0.0, le=60.0, description="first retry delay (s)")
    retry_max: float = Field(2.0, gt=0.0, le=600.0, description="cap of the retry delay (s)")
    retry_multiplier: float = Field(2.0, ge=1.0, le=10.0)
    retry_jitter: float = Field(0.5, ge=0.0, lt=1.0, description="delay x U(1-j, 1+j)")
    resend_initial: float = Field(
        1.0, gt=0.0, le=60.0, description="LINK unanswered: first repeat after (s); doubles")
    resend_max: float = Field(4.0, gt=0.0, le=600.0, description="cap of the LINK repeat (s)")
    unlink_timeout: float = Field(5.0, gt=0.0, le=3600.0, description="drain bound (s)")
    tombstone_ttl: float = Field(60.0, ge=0.0, description="remember closed incarnations (s)")
    max_links_per_socket: int | None = Field(None, ge=1, description="None: unlimited")
    memory_budget: int | None = Field(
        1 << 30, ge=1 << 10, le=1 << 40,
        description="bytes all receiving links of a node may hold (credits x max message "
                    "size, summed; a receiving socket's max_message_size must fit); "
                    "None: unlimited")

    def window_share(self, credits: int, max_message_size: int, links: int = 1) -> int:
        """The receive window (credits) each of ``links`` links of a socket with ``credits``
        and ``max_message_size`` gets under :attr:`memory_budget` when they are the budget's
        only holders: ``budget // (links x max size)``, capped by ``credits``, at least 1."""
        budget = self.memory_budget
        if budget is None:
            return credits
        return max(1, min(credits, budget // (links * max_message_size)))

    def grant_batch(self, credits: int) -> int:
        """Deliveries that trigger a FLOW for a link with ``credits`` capacity (>= 1)."""
        return max(1, math.ceil(credits * self.grant_batch_fraction))
