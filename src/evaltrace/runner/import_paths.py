"""Where eval.yaml's ``module:attr`` references are imported from, and what a failed import tells the user.

``evaltrace run evals/eval.yaml`` must import the project's own modules whatever the working directory is, as
``pytest`` does. The directories put on ``sys.path`` (front, in this order) are: the ``pythonpath:`` entries of
eval.yaml (relative to its directory), the eval.yaml's directory, the project root (the nearest directory upward
holding ``pyproject.toml`` or ``.git``) and that root's ``src/`` (the src layout), when it exists.
"""

from __future__ import annotations

import difflib
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evaltrace.runner.errors import RunConfigError

__all__ = ["PROJECT_MARKERS", "import_dirs", "import_object", "project_root"]

PROJECT_MARKERS = ("pyproject.toml", ".git")
"""A directory holding one of these is a project root."""
_FIX = "add `pythonpath:` to eval.yaml or run from the project root"


def project_root(start: Path) -> Path | None:
    """The nearest directory from ``start`` upward that holds ``pyproject.toml`` or ``.git`` (None when none does)."""
    for directory in (start, *start.parents):
        if any((directory / marker).exists() for marker in PROJECT_MARKERS):
            return directory
    return None


def import_dirs(path: Path, base_dir: Path, pythonpath: Any = ()) -> list[Path]:
    """The directories that eval.yaml's references import from, in search order, each absolute and existing.

    Args:
        path: The config file (named in error messages).
        base_dir: The eval.yaml's directory: ``pythonpath`` entries are relative to it.
        pythonpath: The ``pythonpath:`` value as written (a list of directories).

    Returns:
        The ``pythonpath`` entries, ``base_dir``, the project root and its ``src/`` (duplicates dropped).

    Raises:
        RunConfigError: ``pythonpath`` is not a list of strings, or an entry is not an existing directory.
    """
    base = base_dir.resolve()
    if pythonpath is None:
        pythonpath = []
    if not isinstance(pythonpath, list | tuple):
        raise RunConfigError(path, "pythonpath", f"expected a list of directories, got {type(pythonpath).__name__}")
    found: list[Path] = []
    for index, entry in enumerate(pythonpath):
        if not isinstance(entry, str) or not entry.strip():
            raise RunConfigError(path, f"pythonpath[{index}]", f"expected a directory path, got {entry!r}")
        directory = (base / entry).resolve()
        if not directory.is_dir():
            problem = "does not exist" if not directory.exists() else "is not a directory"
            raise RunConfigError(
                path, f"pythonpath[{index}]", f"{entry!r} ({directory}) {problem}; paths are relative to {base}"
            )
        found.append(directory)
    found.append(base)
    root = project_root(base)
    if root is not None:
        found += [root, *([root / "src"] if (root / "src").is_dir() else [])]
    return list(dict.fromkeys(found))


def import_object(reference: str, dirs: Sequence[Path]) -> Any:
    """Import ``"package.module:attribute"`` with ``dirs`` (see :func:`import_dirs`) at the front of ``sys.path``.

    Args:
        reference: ``module:attribute`` (the attribute may be dotted).
        dirs: Directories to import from, in search order.

    Returns:
        The object.

    Raises:
        ValueError: Malformed reference, module not importable, or attribute missing. A module that is not found
            is named with the directories searched and what to do.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"expected 'module:attribute', got {reference!r}")
    for directory in reversed([str(d) for d in dirs]):
        if directory in sys.path:
            continue
        sys.path.insert(0, directory)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise ValueError(_not_found(module_name, exc, dirs)) from None
    except Exception as exc:
        raise ValueError(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from None
    for part in attribute.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"module {module_name!r} has no attribute {attribute!r}")
        obj = getattr(obj, part)
    return obj


def _not_found(module_name: str, exc: ModuleNotFoundError, dirs: Sequence[Path]) -> str:
    missing = exc.name or module_name
    if module_name != missing and not module_name.startswith(missing + "."):
        # The module was found, but something it imports is not installed: pythonpath would not help.
        return (
            f"cannot import module {module_name!r}: it imports {missing!r}, which is not installed for {sys.executable}"
        )
    searched = ", ".join(str(d) for d in dirs)
    hint = _close_module(missing, dirs)
    return (
        f"cannot import module {module_name!r}: no module named {missing!r}{hint}"
        f" (searched {searched} and the installed packages); {_FIX}"
    )


def _close_module(missing: str, dirs: Sequence[Path]) -> str:
    """``; did you mean X?`` when a module or package next to the missing one has a close name."""
    parent, _, leaf = missing.rpartition(".")
    names: set[str] = set()
    for directory in dirs:
        where = directory.joinpath(*parent.split(".")) if parent else directory
        try:
            children = list(where.iterdir())
        except OSError:
            continue
        names.update(c.stem for c in children if c.suffix == ".py" or (c / "__init__.py").is_file())
    close = difflib.get_close_matches(leaf, sorted(names), n=1)
    return f"; did you mean {'.'.join(filter(None, (parent, close[0])))!r}?" if close else ""
