"""Shared test helpers: fixtures built in tmp_path, fakes and process harnesses.

Not test modules. Test files import them as ``from helpers.<module> import ...``: pytest puts
``test/`` on ``sys.path`` (the folder of the top-level conftest.py).
"""
