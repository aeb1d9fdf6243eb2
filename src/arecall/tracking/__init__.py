"""MLflow tracking for every product: the pipeline, the vector experiment, evaluate and sweeps.

One store, one way to write a run, one module per product's logging:

- `arecall.tracking.store`: where the store is, its lock, its creation;
- `arecall.tracking.orphans`: who owns a run, whether that process lives (not by the wall
  clock), and closing the runs of dead owners;
- `arecall.tracking.ends`: how a run ends (statuses, the signals that end it);
- `arecall.tracking.run`: one run (`TrackedRun`), written within MLflow's limits;
- `arecall.tracking.tracker`: the process a tracked ``arecall run`` logs through;
- `arecall.tracking.provenance`: what a run says about its code, config and command;
- `arecall.tracking.view`: the runs table's columns (the experiment's shared view);
- `arecall.tracking.pipeline`, `arecall.tracking.vector`, `arecall.tracking.evaluate`,
  `arecall.tracking.sweep`: what each product logs (`arecall.tracking.sweep_callback` is the
  sweep's Hydra callback).

What a user can rely on: no run stays RUNNING (an exception ends it FAILED with the error as the
``arecall.error`` tag, SIGTERM / SIGINT KILLED with exit 143 / 130, a run whose process died is
closed KILLED); tracking never loses results or makes a user wait (a failure is one line naming
where the results are and ``arecall log <dir>`` to log them later); telemetry is off unless the
environment turns it on. mlflow is imported only when a store is opened, and this package's
``__init__`` imports nothing, so an entry point that does not track does not pay for it. Nothing
here imports the pipeline or the CLI: they pass what a run logs (a config, report files).
"""
