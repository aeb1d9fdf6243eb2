"""The experiment pipeline: configuration, stages, proof and report.

DVC runs each stage as its own process (``python -m arecall.pipeline.stages.<name>``);
``arecall run`` runs the same stage functions in one process. What a run logs to MLflow is
`arecall.tracking`'s (the ``track`` stage and ``arecall run`` pass it the config and reports).
"""
