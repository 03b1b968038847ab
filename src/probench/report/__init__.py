"""Reports: Table II (Markdown + CSV), the paper's figures 3-5 (PNG) and a ``report.md``.

``load`` turns run folders and the paper's reference table into :class:`Entry` rows,
``table`` renders Table II, ``figures`` draws the figures (matplotlib, imported lazily),
``document`` writes ``report.md`` and ``cli`` is ``probench report``.
"""

from probench.report.errors import ReportError, ReportUsageError

__all__ = ["ReportError", "ReportUsageError"]
