"""The benchmark scripts (``python -m bench.NAME --help``, from the repository root); a package so tests can import their helpers.

What it deliberately does not do: ship with the library (``judge`` never imports it).
"""
