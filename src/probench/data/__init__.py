"""Data in: Pro-Bench datasets (loading, validation, synthetic generation) and images."""

from probench.data.dataset import Annotation, Dataset, ImageRecord, Query, load_dataset
from probench.data.errors import DatasetError, ImageDecodeError

__all__ = [
    "Annotation",
    "Dataset",
    "DatasetError",
    "ImageDecodeError",
    "ImageRecord",
    "Query",
    "load_dataset",
]
