"""Importers: other benchmarks' annotation files as probench datasets (docs/FORMATS.md,
"Importing other datasets"). ``probench import coco|refcoco ... --out DATASET``.

- :mod:`~probench.data.importers.coco`: plain COCO detection, one query per category;
- :mod:`~probench.data.importers.refcoco`: RefCOCO-style referring expressions (the refer
  toolkit's ``refs``), one query per distinct sentence of each referred object;
- :mod:`~probench.data.importers.prompts`: the ``--prompts`` table (CSV or JSON) that
  overrides a category's prompts, prompt types and coref set.

Every importer builds the annotations in memory, checks them with the validator (problems
named by their record, as ``probench validate`` names them), then writes the dataset
folder: ``annotations.json`` (atomically) and ``images/`` (symbolic links to the source
images by default, copies with ``copy=True``).
"""
