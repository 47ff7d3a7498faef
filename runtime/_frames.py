"""Which stack frame is the user's: the first one outside the standard library, installed
packages and jaxlint itself (shared by the host-sync counter and `profile`)."""

from __future__ import annotations

import functools as ft
import os
import sys
import sysconfig
from types import FrameType


@ft.cache
def _library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    dirs = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    here = os.path.dirname(os.path.abspath(__file__))  # jaxlint.runtime
    dirs.add(here)
    try:
        import jaxlint

        dirs.add(os.path.dirname(os.path.abspath(jaxlint.__file__)))
    except ImportError:  # pragma: no cover - runtime/ always ships inside jaxlint
        pass
    for name in ("jax", "jaxlib", "numpy", "equinox", "optax", "flax"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            dirs.add(os.path.dirname(os.path.abspath(module.__file__)))  # type: ignore[arg-type]
    return tuple(sorted(os.path.join(d, "") for d in dirs))


@ft.cache
def _user_prefixes() -> tuple[str, ...]:
    """Folders inside the library folders that hold user-like code: jaxlint's own fixtures."""
    try:
        import jaxlint.fixtures
    except ImportError:  # pragma: no cover
        return ()
    return tuple(os.path.join(os.path.dirname(os.path.abspath(p)), "") for p in [jaxlint.fixtures.__file__ or ""])


@ft.lru_cache(maxsize=4096)
def is_library(filename: str) -> bool:
    """Whether code in `filename` belongs to Python, an installed package or jaxlint."""
    if filename.startswith("<"):
        return filename.startswith("<frozen")
    path = os.path.abspath(filename)
    if path.startswith(_user_prefixes()):
        return False
    return path.startswith(_library_prefixes())


def user_frame(frame: FrameType | None) -> FrameType | None:
    """The first frame from `frame` outwards whose code is the user's, or None."""
    while frame is not None and is_library(frame.f_code.co_filename):
        frame = frame.f_back
    return frame


def user_site(depth: int = 1) -> tuple[str, int] | None:
    """`(filename, line)` of the innermost user frame of the caller's stack."""
    frame = user_frame(sys._getframe(depth + 1))
    return None if frame is None else (frame.f_code.co_filename, frame.f_lineno)
