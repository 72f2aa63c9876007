"""The one error manifests raise: which document, which field, what is wrong, on one line."""

from __future__ import annotations


class DocumentNumber(int):
    """A document's 1-based position in the stream; for an item of a `kind: List` document, the
    list's position, also carrying the item's index in `items`. It is the int every message,
    comparison and sort uses, and it says both numbers wherever it is written out:
    `document 3 (items[5])`."""

    item: int | None

    def __new__(cls, number: int, item: int | None = None) -> DocumentNumber:
        made = super().__new__(cls, number)
        made.item = item
        return made

    def __str__(self) -> str:
        if self.item is None:
            return int.__repr__(self)
        return f"{int.__repr__(self)} (items[{self.item}])"

    __repr__ = __str__

    def __format__(self, spec: str) -> str:
        return str(self) if not spec else format(int(self), spec)


class ManifestError(ValueError):
    """Bad manifest input. `index` is the 1-based position of the document in the stream."""

    def __init__(self, index: int | None, field: str, message: str) -> None:
        self.index = index
        self.field = field
        self.message = " ".join(message.split())  # always one line
        where = f"document {index}" if index is not None else "manifests"
        super().__init__(f"{where}: {field}: {self.message}")
