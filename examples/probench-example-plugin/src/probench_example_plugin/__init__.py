"""A worked example of a probench plugin model (docs/MODELS.md, "Plugin models")."""
