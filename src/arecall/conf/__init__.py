"""Hydra's config directory, importable: importing it stores the schemas in the ConfigStore.

``conf/<group>/<option>.yaml`` extends ``<group>/base_<option>``, a schema stored by
`arecall.pipeline.schema.register`; DVC composes this package (``config_module`` in
``.dvc/config``), so the import below makes the schemas available to it as to ``arecall run``.
"""

from arecall.pipeline.schema import register

register()
