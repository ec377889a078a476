"""Install the structured results in a kernel's IPython: display formatters and a PIL viewer.

Nothing here imports matplotlib, pandas or Pillow: the formatters know their classes by name
(module, class) and match them when such an object is displayed, and the viewer is added by
a hook that runs when Pillow imports its `ImageShow` module (on the first `Image.show()`).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import typing
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from IPython.core.formatters import BaseFormatter
from traitlets import ObjectName

from jupyter_ci.agent.chart_text import CHART_MIME

if TYPE_CHECKING:
    from jupyter_ci.wire.charts import Chart, Table

TABLE_MIME = "application/vnd.dataresource+json"

#: Turns an object into its JSON object (or None: no such output).
Printer = Callable[[Any], dict[str, object] | None]


# The readers (and the wire classes they build) load when a figure or a frame is first
# displayed: `%load_ext jupyter_ci` stays as fast as without them.
def figure_chart(fig: Any) -> dict[str, object] | None:
    """Return a matplotlib Figure's chart JSON, or None."""
    from jupyter_ci.kernel.structured import charts

    return _json(charts.figure_chart(fig))


def frame_table(frame: Any) -> dict[str, object] | None:
    """Return a pandas DataFrame's table JSON, or None."""
    from jupyter_ci.kernel.structured import tables

    return _json(tables.frame_table(frame))


def series_table(series: Any) -> dict[str, object] | None:
    """Return a pandas Series' table JSON, or None."""
    from jupyter_ci.kernel.structured import tables

    return _json(tables.series_table(series))


def _json(found: Chart | Table | None) -> dict[str, object] | None:
    from jupyter_ci.wire.codec import encode

    return None if found is None else typing.cast("dict[str, object]", encode(found))

#: What the data is read from, by where a class says it lives (module, name): pandas' classes
#: say "pandas" since pandas 3, its submodules before.
_CHARTS: dict[tuple[str, str], Printer] = {("matplotlib.figure", "Figure"): figure_chart}
_TABLES: dict[tuple[str, str], Printer] = {
    ("pandas", "DataFrame"): frame_table, ("pandas.core.frame", "DataFrame"): frame_table,
    ("pandas", "Series"): series_table, ("pandas.core.series", "Series"): series_table}


class JSONDataFormatter(BaseFormatter):
    """A formatter of one JSON MIME type, for the classes it is given by name only."""

    _return_type = (dict,)
    #: A method no object has: objects of other types get no such output (rather than
    #: BaseFormatter's default, their __repr__, which is no JSON).
    print_method = ObjectName("_repr_jupyter_ci_json_")

    def __init__(self, named: dict[tuple[str, str], Printer], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        # Not IPython's registry (for_type_by_name): matplotlib-inline empties every
        # formatter's printers for Figure when pyplot starts (select_figure_formats).
        self.named = named

    def lookup_by_type(self, typ: Any) -> Any:
        """Return the printer named for the class or its nearest base, else IPython's."""
        for cls in getattr(typ, "__mro__", ()):
            printer = self.named.get((cls.__module__, cls.__name__))
            if printer is not None:
                return printer
        registry: Any = super().lookup_by_type  # IPython's own (untyped): raises KeyError
        return registry(typ)


def install(ip: Any) -> None:
    """Add chart and table JSON to what IPython displays; let `Image.show()` display here."""
    formatters = ip.display_formatter.formatters
    if CHART_MIME in formatters:
        return  # installed already (a second %load_ext, a session kernel's restart)
    parent = ip.display_formatter
    formatters[CHART_MIME] = JSONDataFormatter(_CHARTS, parent=parent, format_type=CHART_MIME)
    if TABLE_MIME in formatters:
        # pandas' own (pd.options.display.html.table_schema, enabled first): ours register
        # on it. Else ours takes the slot, and pandas turns it on and off with that option.
        for (module, name), printer in _TABLES.items():
            formatters[TABLE_MIME].for_type_by_name(module, name, printer)
    else:
        formatters[TABLE_MIME] = JSONDataFormatter(
            _TABLES, parent=parent, format_type=TABLE_MIME,
            print_method="_repr_data_resource_")
    if getattr(ip, "kernel", None) is not None:  # in a terminal, a window is what shows it
        after_import("PIL.ImageShow", show_in_kernel)


def show_in_kernel(image_show: ModuleType) -> None:
    """Put a viewer first in Pillow's list that displays the image as this cell's output."""
    from IPython.display import display

    class KernelViewer(image_show.Viewer):  # type: ignore[misc, name-defined]
        """Show an image as display_data (Pillow's own viewers open a desktop window)."""

        format = "PNG"

        def show_image(self, image: Any, **options: Any) -> int:
            display(image)
            return 1

    image_show.register(KernelViewer, order=-1)


def after_import(name: str, then: Callable[[ModuleType], None]) -> None:
    """Run `then` on module `name` now if imported, else right after its first import."""
    module = sys.modules.get(name)
    if module is not None:
        then(module)
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))


class _AfterImport(importlib.abc.MetaPathFinder):
    """Find one module with the other finders, and wrap its loader to run a hook after it."""

    def __init__(self, name: str, then: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.then = then
        self.done = False

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        """Return the module's own spec with a loader that runs the hook, once."""
        if fullname != self.name or self.done:
            return None
        self.done = True  # so the finders asked below, and any later import, pass us by
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: importlib.machinery.ModuleSpec | None = find(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _ThenLoader(spec.loader, self.then)
                # Safe now: the import system stops going through meta_path once found.
                sys.meta_path.remove(self)
                return spec
        return None


class _ThenLoader(importlib.abc.Loader):
    """A module's own loader that runs a hook once the module has run."""

    def __init__(self, loader: Any, then: Callable[[ModuleType], None]) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        """Create the module as its own loader does."""
        module: ModuleType | None = self.loader.create_module(spec)
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Run the module, then the hook (whose failure must not fail the import)."""
        self.loader.exec_module(module)
        # Should Pillow change, Image.show() does what it always did.
        with contextlib.suppress(Exception):
            self.then(module)

    def __getattr__(self, name: str) -> Any:
        # get_source, get_filename, is_package: tracebacks and inspect ask the loader.
        return getattr(self.loader, name)
