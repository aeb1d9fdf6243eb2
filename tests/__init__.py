"""arecall's tests: one folder per package of ``src/arecall``.

A package, so same-named modules in different folders never clash.
"""
