"""Installs the stubs of ``compat_stubs`` in every process with this folder on PYTHONPATH."""

import compat_stubs

compat_stubs.install()
