"""Tests of the Dask launcher (``src/hydra_plugins``)."""
