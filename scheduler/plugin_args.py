"""`PluginArgs`: a plugin's arguments as it reads them, typed and with their declared defaults.

A plugin declares what it takes in `arguments` (name -> `scheduler.framework.Arg`, each with its
`default`); the profile builder checks a profile's values against that and hands the plugin a
`PluginArgs`, the profile's values over the defaults, so a plugin's `__init__` reads
`args.flag("bestFit")` and never repeats a default:

    arguments = {"bestFit": Arg("bool", default=True), "sizeWindow": Arg("duration", default="5m")}
    ...
    self.best_fit = args.flag("bestFit")
    self.window = args.seconds("sizeWindow")

It is a read-only mapping too, so a plugin written for plain dicts (`args.get(name, default)`)
reads it unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from scheduler.durations import duration_seconds
from scheduler.framework import Arg


class PluginArgs(Mapping[str, Any]):
    """The values of `declared` arguments: those `given`, else each one's `Arg.default` (an
    argument without either is absent). The readers below convert a value to its type; they
    are for arguments that have a value: declare a default, or use `get` for one that may be
    absent."""

    def __init__(self, declared: Mapping[str, Arg], given: Mapping[str, Any] | None = None) -> None:
        self.declared = declared
        values = {name: arg.default for name, arg in declared.items() if arg.default is not None}
        values.update(given or {})
        self._values = values

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"PluginArgs({self._values!r})"

    def flag(self, name: str) -> bool:
        return bool(self._values[name])

    def integer(self, name: str) -> int:
        return int(self._values[name])

    def text(self, name: str) -> str:
        return str(self._values[name])

    def seconds(self, name: str) -> int:
        """A `duration` argument in whole seconds (0 when absent)."""
        value = self._values.get(name)
        return (duration_seconds(str(value)) or 0) if value else 0

    def amounts(self, name: str) -> dict[str, int]:
        """A `per_resource` argument, resource -> amount: the declared default when absent or
        empty (as Koordinator defaults an empty map), else {}."""
        value = self._values.get(name) or self._default(name) or {}
        return {str(r): int(v) for r, v in value.items()}

    def object(self, name: str) -> PluginArgs:
        """An `object` argument's fields, read the same way (with their own defaults)."""
        arg = self.declared.get(name)
        fields = dict(arg.fields) if arg is not None else {}
        return PluginArgs(fields, self._values.get(name) or {})

    def _default(self, name: str) -> Any:
        arg = self.declared.get(name)
        return None if arg is None else arg.default
