"""cffi builder for ``placement_native._native`` (API / out-of-line mode).

Every ``*.cdef`` file of this folder is concatenated into the cdef, every ``*.c`` file is
compiled into the one extension, and every ``*.h`` file is included by the generated
module, so each part of the package adds its own files without touching the others'.
The package version is compiled in so the runtime can refuse a stale extension.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent / "placement_native"


def _package_version() -> str:
    text = (PACKAGE / "_version.py").read_text(encoding="utf-8")
    match = re.search(r'^__version__\s*=\s*"([^"]+)"', text, re.MULTILINE)
    if match is None:
        raise RuntimeError(f"no __version__ in {PACKAGE / '_version.py'}")
    return match.group(1)


VERSION = _package_version()

_VERSION_CDEF = "const char *placement_native_version(void);\n"
_VERSION_SOURCE = (
    "const char *placement_native_version(void) { return PLACEMENT_NATIVE_VERSION; }\n"
)

ffibuilder = FFI()
ffibuilder.cdef(
    _VERSION_CDEF + "\n".join(p.read_text(encoding="utf-8") for p in sorted(HERE.glob("*.cdef")))
)
ffibuilder.set_source(
    "placement_native._native",
    "\n".join(f'#include "{h.name}"' for h in sorted(HERE.glob("*.h"))) + "\n" + _VERSION_SOURCE,
    sources=[str(c) for c in sorted(HERE.glob("*.c"))],
    # Rebuild when a header, a cdef or the version changes, not only a .c file.
    depends=[
        str(p) for p in sorted([*HERE.glob("*.h"), *HERE.glob("*.cdef"), PACKAGE / "_version.py"])
    ],
    include_dirs=[str(HERE)],
    define_macros=[("PLACEMENT_NATIVE_VERSION", f'"{VERSION}"'), ("_GNU_SOURCE", "1")],
    extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra"],
    libraries=["dl"] if sys.platform.startswith("linux") else [],
    py_limited_api=True,
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
