"""asyncssh, imported once for the package: the modules here take it from this one (`from specdash.remote.sshlib
import asyncssh`).

On import asyncssh looks for liboqs (post-quantum key exchange) with `ctypes.util.find_library`, twice ("oqs",
"liboqs"). On Linux, for a library that `ldconfig`'s cache does not list, that function goes on to link a
throwaway program with `gcc` and then runs `ld`: five processes per name where a compiler is installed, as on
most developers' machines, 25 ms of CPU and 67 ms of wall time on every `specdash` command, against 4 ms and 9 ms
for the cache alone (2-core dev VM). Here that search asks `ldconfig`'s cache only, while asyncssh is imported: a
liboqs installed where the system's loader finds it is still found; one only on a compiler's search path, which
the loader would not find either, is not.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def _libraries_from_the_loader_cache() -> Iterator[None]:
    """`ctypes.util.find_library` answers from `ldconfig -p` only, for the block (Linux; elsewhere unchanged)."""
    from_cache = getattr(ctypes.util, "_findSoname_ldconfig", None)  # CPython's first step on Linux
    if not sys.platform.startswith("linux") or from_cache is None:
        yield
        return
    search = ctypes.util.find_library
    ctypes.util.find_library = from_cache
    try:
        yield
    finally:
        ctypes.util.find_library = search


with _libraries_from_the_loader_cache():
    import asyncssh

__all__ = ["asyncssh"]
