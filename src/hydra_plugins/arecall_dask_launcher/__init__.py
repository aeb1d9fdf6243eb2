"""``hydra/launcher=dask``: each point of an ``arecall run -m`` sweep runs on a Dask cluster.

Hydra finds this package in the ``hydra_plugins`` namespace; `config` registers the launcher's
config node, `dask_launcher` the launcher, `_core` ships the jobs (imported only when a sweep
launches, so Hydra's plugin scan stays cheap and works without the ``cluster`` extra).
"""
