"""The one error manifests raise: which document, which field, what is wrong, on one line."""

from __future__ import annotations


class ManifestError(ValueError):
    """Bad manifest input. `index` is the 1-based position of the document in the stream."""

    def __init__(self, index: int | None, field: str, message: str) -> None:
        self.index = index
        self.field = field
        self.message = " ".join(message.split())  # always one line
        where = f"document {index}" if index is not None else "manifests"
        super().__init__(f"{where}: {field}: {self.message}")
