"""Hydra's config directory, importable: importing it stores the schemas in the ConfigStore.

``conf/<group>/<option>.yaml`` extends ``<group>/base_<option>``, a schema stored by
`arecall.pipeline.schema.register`; DVC composes this package (``config_module`` in
``.dvc/config``), so the import below makes the schemas available to it as to ``arecall run``.
DVC composes it while it prepares a workspace experiment: `arecall.pipeline.workspace` then
holds the workspace for that experiment, so a second ``dvc exp run`` is refused untouched.
"""

from arecall.pipeline.schema import register
from arecall.pipeline.workspace import hold_workspace

register()
hold_workspace()
