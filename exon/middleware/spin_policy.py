"""How long an asyncio receive spins before it parks: the native spin policy
(``exon/native/src/concurrent/exon_spin_policy.h``), for the sockets, which reach C only through the
middleware.

A policy is one small C struct per socket; :func:`spin_budget` and :func:`spin_outcome`
are the cffi functions themselves (no wrapper: ``areceive`` calls them on every spin).
"""

from __future__ import annotations

from typing import Any

from exon.native import ffi, lib

__all__ = ["new_spin_policy", "spin_budget", "spin_outcome"]

#: ``spin_budget(policy, spin_ns) -> int``: the next wait's spin, ``spin_ns`` or 0 (park at
#: once) while the policy backs off
spin_budget = lib.exon_spin_policy_budget
#: ``spin_outcome(policy, answered)``: whether a wait given a budget ended during its spin
spin_outcome = lib.exon_spin_policy_outcome


def new_spin_policy() -> Any:
    """A fresh ``exon_spin_policy_t *`` (zeroed: the policy's starting state)."""
    return ffi.new("exon_spin_policy_t *")
