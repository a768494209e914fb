"""The C benchmark loops live in exon.native._bench, not in the library's _exon module."""

from __future__ import annotations

from pathlib import Path

import pytest

from exon import errors, native
from exon.native import bench_loops as bench

LOOPS = ("exon_bench_ipc_throughput", "exon_bench_net_throughput", "exon_bench_net_pingpong",
         "exon_bench_udp_floor")


def _module_file(module: object) -> bytes:
    return Path(module.__file__).read_bytes()  # type: ignore[attr-defined]


def test_the_library_module_carries_no_benchmark_loop() -> None:
    import exon.native._exon as core

    for name in LOOPS:
        assert not hasattr(native.lib, name)
        assert hasattr(bench.lib, name)
    image = _module_file(core)
    assert b"exon_bench" not in image  # no symbol, no debug name: the code is not there


def test_the_bench_module_holds_the_loops() -> None:
    import exon.native._bench as loops

    image = _module_file(loops)
    for name in LOOPS:
        assert name.encode() in image


def test_a_library_handle_casts_into_the_bench_module() -> None:
    pointer = native.ffi.cast("exon_publication_t *", 0x1000)
    cast = bench.handle(pointer, "exon_publication_t *")
    assert bench.ffi.typeof(cast) is bench.ffi.typeof("exon_publication_t *")
    assert int(bench.ffi.cast("uintptr_t", cast)) == 0x1000


def test_the_bench_module_compiles_no_core_function() -> None:
    # the loops call the library's own functions through pointers (exon_bench_core.h)
    import ctypes

    import exon.native._bench as loops

    image = ctypes.CDLL(loops.__file__)
    assert hasattr(image, "exon_bench_udp_floor")
    for name in ("exon_publication_offer", "exon_image_poll_count", "exon_set_error",
                 "exon_log_clean_to"):
        assert not hasattr(image, name), name


def test_bench_errors_are_typed_with_the_library_error_text() -> None:
    rtt = bench.ffi.new("int64_t[]", 1)
    with pytest.raises(errors.ExonError, match="udp floor: bad msg_len 0"):
        bench.check(bench.lib.exon_bench_udp_floor(0, 1, 10**9, rtt))  # 0 bytes: invalid
    assert bench.check(5) == 5
