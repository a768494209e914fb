# The C core in exon/native/ is compiled by cffi (API mode, out of line) at install time,
# beside a small GIL-holding door for the non-blocking hot calls (exon/native/fastpath/). The
# benchmark loops (exon.native._bench) are a development build, not part of an install or a
# wheel: exon/native/build.py builds them in place (exon/native/bench_loops.py on first use).
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "exon", "native"))
from build import archive_extension, fast_extension

setup(
    cffi_modules=["exon/native/build.py:ffibuilder"],
    ext_modules=[fast_extension(), archive_extension()],
)
