# The C core in exon/native/ is compiled by cffi (API mode, out of line) at install time.
from setuptools import setup

setup(cffi_modules=["exon/native/build.py:ffibuilder"])
