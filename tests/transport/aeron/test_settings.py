"""DriverSettings: Aeron's defaults, validated limits, EXON_ environment variables."""

from __future__ import annotations

import os

import pytest

from exon.errors import ConfigurationError
from exon.transport.aeron.settings import DriverSettings


def test_defaults_are_aerons_but_for_terms_and_the_receive_window() -> None:
    s = DriverSettings()
    assert s.mtu_length == 1408
    # exon's terms are 2 MiB (Aeron: 16 MiB UDP, 64 MiB IPC; settings.py says why)
    assert s.term_buffer_length == 2 * 1024 * 1024
    assert s.ipc_term_buffer_length == 2 * 1024 * 1024
    # exon's receive window and socket buffer are above Aeron's 128 KiB each (settings.py)
    assert s.initial_window_length == 512 * 1024
    assert s.socket_rcvbuf_length == 2 * 1024 * 1024
    assert s.status_message_timeout_ns == 200_000_000
    assert s.image_liveness_timeout_ns == 10_000_000_000
    assert s.publication_linger_timeout_ns == 5_000_000_000
    assert s.client_liveness_timeout_ns == 10_000_000_000
    assert s.retransmit_unicast_linger_ns == 10_000_000
    assert s.max_resend == 16
    assert s.max_image_term_length == 64 * 1024 * 1024  # above Aeron's 16 MiB UDP default
    assert s.threading_mode == "DEDICATED"


def test_windows_follow_term_length() -> None:
    s = DriverSettings()
    assert s.receiver_window(65536) == 32768
    assert s.receiver_window(16 * 1024 * 1024) == 512 * 1024
    assert s.publication_window(65536, ipc=True) == 32768


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("term_buffer_length", 100_000, "power of two"),
        ("term_buffer_length", 32 * 1024, "term length"),
        ("mtu_length", 1000, "multiple of 32"),
        ("mtu_length", 70000, "multiple of 32"),
        ("file_page_size", 3000, "power of two"),
        ("max_resend", 0, "max_resend"),
        ("to_driver_buffer_length", 1000, "power of two"),
        ("max_image_term_length", 3 * 1024 * 1024, "power of two"),
        ("max_image_term_length", 32 * 1024, "term length"),
        ("max_image_term_length", 2 * 1024 * 1024 * 1024, "term length"),
    ],
)
def test_bad_values_name_the_field(field: str, value: int, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        DriverSettings.from_env({}, **{field: value})
    assert field in str(info.value)
    assert fragment in str(info.value)


def test_environment_is_read_with_units() -> None:
    env = {
        "EXON_THREADING_MODE": "shared",
        "EXON_TERM_BUFFER_LENGTH": "1m",
        "EXON_IMAGE_LIVENESS_TIMEOUT_NS": "2s",
        "EXON_NAK_UNICAST_DELAY_NS": "50us",
        "EXON_MAX_IMAGE_TERM_LENGTH": "128k",
    }
    s = DriverSettings.from_env(env)
    assert s.threading_mode == "SHARED"
    assert s.term_buffer_length == 1024 * 1024
    assert s.image_liveness_timeout_ns == 2_000_000_000
    assert s.nak_unicast_delay_ns == 50_000
    assert s.max_image_term_length == 128 * 1024


def test_explicit_arguments_win_over_environment() -> None:
    s = DriverSettings.from_env({"EXON_MTU_LENGTH": "4096"}, mtu_length=8192)
    assert s.mtu_length == 8192


def test_bad_environment_value_names_the_field() -> None:
    with pytest.raises(ConfigurationError, match="threading_mode"):
        DriverSettings.from_env({"EXON_THREADING_MODE": "TURBO"})


def test_mtu_must_fit_the_term() -> None:
    with pytest.raises(ConfigurationError, match="mtu_length"):
        DriverSettings.from_env({}, term_buffer_length=65536, mtu_length=16384)


def test_an_over_long_driver_dir_is_a_configuration_error_naming_the_limit(tmp_path) -> None:
    # every log file path is built under the dir in 4096 bytes (C): a dir near that would
    # have had its log paths cut short; it is refused here, before anything is created
    from exon.transport.aeron import MediaDriver, layout

    limit = layout.DRIVER_DIR_MAX_LENGTH
    longest = str(tmp_path / "d")
    while len(longest) < limit - 1:  # components a file system takes (at most 200 bytes)
        room = limit - 1 - len(longest)
        longest += "/" + "x" * (min(room, 200) - 1) if room >= 2 else "x"
    assert len(longest.encode()) == limit - 1
    assert DriverSettings.from_env({}, dir=longest).dir == longest
    too_long = longest + "é"  # two bytes of UTF-8: lengths are counted in bytes
    with pytest.raises(ConfigurationError,
                       match=rf"dir: .* is {limit + 1} bytes long; it must be shorter than "
                             rf"{limit} \(room for the file names under it\)"):
        DriverSettings.from_env({}, dir=too_long)
    with pytest.raises(ConfigurationError, match=rf"is {limit + 1} bytes long"):
        MediaDriver.launch(dir=too_long)
    assert not os.path.exists(tmp_path / "d")
    for bad in ("", "/dev/shm/a\0b"):
        with pytest.raises(ConfigurationError, match=r"dir: .*non-empty path without NUL"):
            DriverSettings.from_env({}, dir=bad)
