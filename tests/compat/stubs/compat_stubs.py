"""Stand-ins for the heavy libraries verl and OpenRLHF import at module level.

The tests run verl's and OpenRLHF's own placement and worker-group code, which needs none
of these libraries to work, but their modules import them (and use their names in class
bodies, decorators and annotations) at import time. Each stubbed module answers every
attribute with a stub class: callable, subclassable, usable as a decorator, a context
manager, a generic (``X[...]``) or in a union (``X | None``). Nothing here computes.

Only imports made by verl, OpenRLHF or the tests' workers are stubbed (see
``FRAMEWORKS``). ``install()`` puts the finder first on ``sys.meta_path``;
``sitecustomize`` (beside this file) calls it in every process started with this folder on
``PYTHONPATH``, Ray's worker processes included.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

STUBBED = frozenset(
    {
        "torch",
        "torchdata",
        "tensordict",
        "transformers",
        "vllm",
        "deepspeed",
        "peft",
        "flash_attn",
        "accelerate",
        "datasets",
        "codetiming",
        "hydra",
        "omegaconf",
        "pylatexenc",
        "torchmetrics",
        "bitsandbytes",
        "optimum",
        "einops",
        "loralib",
        "jsonlines",
        "tensorboard",
        "wandb",
        "pynvml",
        "math_verify",
        "latex2sympy2_extended",
        "safetensors",
        "liger_kernel",
        "sglang",
        "megatron",
        "mbridge",
        "word2number",
        "PIL",
        "aiohttp",
        "sympy",
    }
)
"""Top-level names stubbed (and every submodule under them)."""

VERSION = "99.0.0"


class _Meta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return stub_class(f"{cls.__name__}.{name}")

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls

    def __iter__(cls) -> Any:
        return iter(())


class Stub(metaclass=_Meta):
    """An instance of any stubbed class: accepts anything, does nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]  # used as a decorator
        return Stub()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return Stub()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def __iter__(self) -> Any:
        return iter(())

    def __bool__(self) -> bool:
        return False


def stub_class(name: str) -> type:
    return _Meta(name.rsplit(".", 1)[-1], (Stub,), {"__module__": name.rsplit(".", 1)[0]})


class StubModule(types.ModuleType):
    """A stubbed module: every attribute a stub class, every submodule a stub module."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []
        self.__version__ = VERSION

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = stub_class(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Loader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _installed(top: str) -> bool:
    """The real package is there (then it is used: only missing ones are stubbed)."""
    if top not in _INSTALLED:
        _INSTALLED[top] = importlib.machinery.PathFinder.find_spec(top) is not None
    return _INSTALLED[top]


_INSTALLED: dict[str, bool] = {}

FRAMEWORKS = ("verl", "openrlhf", "compat_workers")
"""Only imports made (directly or not) by these modules get stubs: Ray's own optional
imports in the same processes (``torch``, ``pynvml``, ...) still find nothing."""


def _asked_by_framework() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        name = str(frame.f_globals.get("__name__", ""))
        if name.split(".", 1)[0] in FRAMEWORKS:
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class StubFinder(importlib.abc.MetaPathFinder):
    """Finds the ``STUBBED`` packages (and their submodules) as stub modules."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        top = fullname.split(".", 1)[0]
        if top not in STUBBED or _installed(top) or not _asked_by_framework():
            return None
        return importlib.machinery.ModuleSpec(fullname, _Loader(), is_package=True)


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, StubFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, StubFinder())
