"""The archive's errors, under :class:`exon.ExonError`."""

from __future__ import annotations

from exon.errors import ConfigurationError, ExonError, ProtocolError


class ArchiveError(ExonError):
    """Something the archive could not do (the message says what and why)."""


class RecordingNotFound(ArchiveError, KeyError):
    """No recording has that name or id: ``.recording`` holds what was asked for."""

    def __init__(self, recording: str | int) -> None:
        super().__init__(f"no recording {recording!r}")
        self.recording = recording

    def __str__(self) -> str:  # KeyError would quote the message again
        return str(self.args[0])


class ReplayRangeError(ArchiveError, ConfigurationError):
    """A replay or truncate position outside ``[start_position, stop_position]`` or not on a
    record boundary."""


class ArchiveCorrupt(ArchiveError):
    """A segment or catalog failed a check: ``.path`` and ``.offset`` say where."""

    def __init__(self, message: str, *, path: str, offset: int) -> None:
        super().__init__(f"{path} at offset {offset}: {message}")
        self.path = path
        self.offset = offset


class ArchiveLocked(ArchiveError):
    """Another archive service holds the directory."""


class ArchiveFull(ArchiveError, OSError):
    """Writing a recording failed (disk full, I/O error): recording stopped; nothing after
    the durable position was acknowledged."""


class ControlError(ArchiveError, ProtocolError):
    """A control request or response that does not decode, or an unknown operation."""


class IndexBuilding(ArchiveError):
    """The recording's time index is still being built (a first ``position_at`` on a
    long recording): ask again. ``ArchiveClient.position_at`` does, for up to its ``wait``."""


#: name -> class, for errors that travel in control responses
BY_NAME: dict[str, type[ArchiveError]] = {
    cls.__name__: cls
    for cls in (ArchiveError, RecordingNotFound, ReplayRangeError, ArchiveCorrupt,
                ArchiveLocked, ArchiveFull, ControlError, IndexBuilding)
}
