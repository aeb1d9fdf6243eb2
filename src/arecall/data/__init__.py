"""What is measured: collections, the sources they come from, and who may see what.

`collection` is the in-memory (and on-disk) corpus with its queries, judgements and ACL;
`sources` builds one from a named source; `authorization` applies an authorization model.
"""
