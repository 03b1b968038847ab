"""Errors of the data room (datasets and images)."""

from __future__ import annotations

from probench.errors import CheckFailed


class DatasetError(CheckFailed):
    """A dataset cannot be used; ``problems`` lists one line per malformed record."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])

    def __str__(self) -> str:
        if not self.problems:
            return super().__str__()
        return super().__str__() + "\n" + "\n".join(f"  {p}" for p in self.problems)


class ImageDecodeError(CheckFailed):
    """An image file or buffer could not be decoded into pixels."""
