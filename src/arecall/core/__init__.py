"""The definitions everything else is measured against.

One module per concept: `measures` (each measure's definition and the registry of its names),
`placement` (post- and pre-filtering, per list and for all pairs at once), `ranking` (the ranked
lists a retriever produces), `scoring` (the batch kernels, tested against `measures`),
`significance` (paired bootstrap and randomization tests), `ragged` (position-within-group over
flat arrays), `errors` (the one user-facing error type).
"""
