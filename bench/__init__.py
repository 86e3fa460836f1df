"""The benchmark scripts (``python bench/NAME.py --help``); a package so tests can import their helpers.

What it deliberately does not do: ship with the library (``judge`` never imports it).
"""
