"""The prediction cache (docs/FORMATS.md, run folders): run folders written atomically and resumably."""

from probench.cache.atomic import write_json_atomic, write_text_atomic
from probench.cache.errors import CacheError
from probench.cache.run import JsonlLog, PredictionWriter, RunDir, sort_results

__all__ = [
    "CacheError",
    "JsonlLog",
    "PredictionWriter",
    "RunDir",
    "sort_results",
    "write_json_atomic",
    "write_text_atomic",
]
