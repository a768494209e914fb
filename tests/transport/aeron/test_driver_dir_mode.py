"""Driver directories are private by default (0700, files 0600); dir_mode shares them with a
group on purpose (issue 28)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from exon.transport.aeron import Aeron, DriverSettings, MediaDriver

SMALL = {"ipc_term_buffer_length": 64 * 1024, "term_buffer_length": 64 * 1024}


def _modes(root: str) -> dict[str, int]:
    out = {}
    for path in [Path(root), *Path(root).rglob("*")]:
        out[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    return out


def _exercise(dir: str) -> dict[str, int]:
    with Aeron.connect(dir) as aeron:
        pub = aeron.add_publication("aeron:ipc", 7)
        sub = aeron.add_subscription("aeron:ipc", 7)
        modes = _modes(dir)
        pub.close()
        sub.close()
    return modes


@pytest.mark.parametrize(("dir_mode", "file_mode"), [(None, 0o600), (0o770, 0o660)])
def test_every_directory_and_file_gets_the_mode(driver_dir: str, dir_mode: int | None,
                                                file_mode: int) -> None:
    options = {} if dir_mode is None else {"dir_mode": dir_mode}
    old = os.umask(0o022)  # a usual umask must not widen nor narrow what was asked
    try:
        with MediaDriver.launch(dir=driver_dir, **SMALL, **options):
            modes = _exercise(driver_dir)
    finally:
        os.umask(old)
    want_dir = dir_mode or 0o700
    logs = [name for name in modes if name.endswith(".logbuffer")]
    assert logs, modes
    for name, mode in modes.items():
        if name in (".", "publications", "images"):
            assert mode == want_dir, (name, oct(mode))
        else:
            assert mode == file_mode, (name, oct(mode))


def test_an_old_loose_driver_dir_is_made_private(driver_dir: str) -> None:
    with MediaDriver.launch(dir=driver_dir, **SMALL):
        pass
    os.chmod(driver_dir, 0o777)  # as drivers before issue 28 left it
    with MediaDriver.launch(dir=driver_dir, **SMALL):
        assert stat.S_IMODE(os.stat(driver_dir).st_mode) == 0o700


@pytest.mark.parametrize("mode", [0o755, 0o777, 0o600, 0o707])
def test_dir_modes_open_to_others_are_refused(mode: int) -> None:
    with pytest.raises(ValueError, match="dir_mode"):
        DriverSettings(dir_mode=mode)


def test_dir_mode_reads_octal_text() -> None:
    assert DriverSettings(dir_mode="0770").dir_mode == 0o770  # type: ignore[arg-type]
