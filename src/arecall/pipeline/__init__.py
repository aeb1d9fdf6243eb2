"""The experiment pipeline: configuration, stages, proof, report and tracking.

DVC runs each stage as its own process (``python -m arecall.pipeline.stages.<name>``);
``arecall run`` runs the same stage functions in one process.
"""
