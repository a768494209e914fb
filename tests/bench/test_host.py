"""exon.bench.host reads whether a VM's balloon reports free pages from a sysfs tree."""

from __future__ import annotations

from pathlib import Path

from exon.bench.host import free_page_reporting


def _device(root: Path, name: str, device_id: int, features: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    (d / "device").write_text(f"0x{device_id:04x}\n")
    (d / "features").write_text(features + "\n")


def test_a_balloon_with_the_reporting_bit_reports_free_pages(tmp_path: Path) -> None:
    _device(tmp_path, "virtio0", 2, "1" * 64)  # a block device: its bits do not count
    _device(tmp_path, "virtio1", 5, "0110010100" + "0" * 54)
    assert free_page_reporting(str(tmp_path)) is True


def test_a_balloon_without_it_does_not(tmp_path: Path) -> None:
    _device(tmp_path, "virtio0", 5, "0110000100" + "0" * 54)
    assert free_page_reporting(str(tmp_path)) is False


def test_no_balloon_or_no_sysfs_is_unknown(tmp_path: Path) -> None:
    _device(tmp_path, "virtio0", 1, "1" * 64)  # a network device
    assert free_page_reporting(str(tmp_path)) is None
    assert free_page_reporting(str(tmp_path / "missing")) is None


def test_an_unreadable_device_entry_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "virtio0").mkdir()  # no device file
    _device(tmp_path, "virtio1", 5, "000001")
    (tmp_path / "virtio2").mkdir()
    (tmp_path / "virtio2" / "device").write_text("garbage\n")
    assert free_page_reporting(str(tmp_path)) is True
