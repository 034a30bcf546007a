"""Build hook for the cffi extension; all metadata lives in pyproject.toml.

The extension is optional at install time: where no C compiler is available the package
installs without it and uses the pure-Python fallback. Set ``PLACEMENT_NATIVE_REQUIRE_EXTENSION=1``
(as CI does) to make a failed compile fail the install instead.
"""

from __future__ import annotations

import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalBuildExt(build_ext):
    """build_ext that turns a failed compile into a warning unless the extension is required."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            self._give_up(exc)

    def build_extension(self, ext):  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            self._give_up(exc)

    @staticmethod
    def _give_up(exc: BaseException) -> None:
        if os.environ.get("PLACEMENT_NATIVE_REQUIRE_EXTENSION") == "1":
            raise exc
        print(
            f"WARNING: placement_native._native was not built ({exc}); "
            "the pure-Python fallback will be used",
            file=sys.stderr,
        )


setup(
    cffi_modules=["src/_placement_native_build/build.py:ffibuilder"],
    cmdclass={"build_ext": OptionalBuildExt},
    # One abi3 wheel for every CPython >= 3.11 (cffi marks the extension py_limited_api).
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
