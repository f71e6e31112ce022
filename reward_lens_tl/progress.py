r"""Progress bars without noise: one bar per long job, and none where nobody watches.

Every long job of the package (scoring pairs, a benchmark, a token sweep, SAE training) shows
its bar through `progress_bar`, which picks what fits where the code runs:

- in a terminal, tqdm's text bar on stderr;
- when stderr is not a terminal (a log file, a pipe, CI), no bar at all: no `\r` and no
  escape codes in the log;
- in Jupyter, a widget bar (`tqdm.notebook`) when `ipywidgets` is installed (the `notebook`
  extra), else tqdm's text bar, which Jupyter redraws in place; never the
  "IProgress not found" warning that `tqdm.auto` prints without `ipywidgets`.

Examples:
    >>> import io
    >>> log = io.StringIO()  # not a terminal: the bar stays silent
    >>> sum(progress_bar(range(4), desc="demo", file=log)), log.getvalue()
    (6, '')
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import IO, Any


def in_notebook() -> bool:
    """Whether the code runs in a Jupyter kernel whose front end draws HTML (not a console).

    The same test as `tqdm.autonotebook`: an IPython kernel (`ipykernel.zmqshell` imported),
    but not Jupyter's Qt console or Spyder.

    Returns:
        `True` in a notebook (JupyterLab, classic Notebook, VS Code, Colab).

    Examples:
        >>> in_notebook()  # a doctest runs in no kernel
        False
    """
    if "ipykernel.zmqshell" not in sys.modules:
        return False
    if any(key == "QT_API" or key.startswith("SPYDER") for key in os.environ):
        return False
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)()
    name = type(shell).__name__.lower()
    return shell is not None and "qt" not in name and "spyder" not in name


def _widget_bar() -> type | None:
    """`tqdm.notebook.tqdm` when `ipywidgets` can draw it, else `None` (no warning either way)."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is None:
        return None
    try:
        from tqdm import notebook
    except ImportError:  # pragma: no cover - a broken IPython install
        return None
    return notebook.tqdm if getattr(notebook, "IProgress", None) is not None else None


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: float | None = None,
    desc: str | None = None,
    unit: str = "it",
    initial: float = 0,
    show: bool = True,
    file: IO[str] | None = None,
    **options: Any,
) -> Any:
    """A tqdm bar for one long job, shown only where someone watches it.

    Use it as tqdm: iterate over it, or `update(n)` it inside a `with` block. With
    `show=False` (or stderr not a terminal outside Jupyter) it is a disabled bar: iterating
    yields the items, `update` and `close` do nothing, nothing is written.

    Args:
        iterable: The items to iterate over (`None`: count with `update`).
        total: The expected number of items (default: `len(iterable)` when it has one).
        desc: The label before the bar.
        unit: The name of one item (`"pair"`, `"chunk"`).
        initial: The count to start from (a resumed job's finished items).
        show: Show the bar at all (`False`: a disabled bar).
        file: Where a text bar goes (default: `sys.stderr`); a bar is drawn only when it is a
            terminal, or in Jupyter.
        **options: Further keywords of `tqdm.tqdm` (`leave`, `mininterval`, ...).

    Returns:
        The bar (a `tqdm.tqdm`, or a `tqdm.notebook.tqdm` in Jupyter with `ipywidgets`).

    Examples:
        >>> with progress_bar(total=3, desc="scoring", unit="pair", show=False) as bar:
        ...     bar.update(3)  # a disabled bar: nothing counted, nothing written
        >>> bar.disable
        True
    """
    from tqdm.std import tqdm as text_bar

    file = sys.stderr if file is None else file
    kwargs = dict(total=total, desc=desc, unit=unit, initial=initial, **options)
    if not show:
        return text_bar(iterable, disable=True, file=file, **kwargs)
    if in_notebook():
        widget = _widget_bar()
        if widget is not None:
            return widget(iterable, **kwargs)
        return text_bar(iterable, disable=False, file=file, **kwargs)  # Jupyter redraws `\r`
    return text_bar(iterable, disable=None, file=file, **kwargs)  # None: off unless a TTY


__all__ = ["in_notebook", "progress_bar"]
