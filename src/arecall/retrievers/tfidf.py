"""The seed's TF-IDF, exactly, on scipy sparse matrices.

Tokens are ``[a-z0-9]+`` of the lower-cased text; tf weight 1 + ln(count); idf
ln((n + 1) / (df + 1)) + 1; vectors L2-normalised; score = cosine. A query term the corpus never
saw has idf 1.0: it scores against nothing but still counts in the query's norm, so the scores
(not only the order) equal the seed's.

Tokenising is the slow part of any TF-IDF in Python. Here it runs on Arrow buffers — a byte
table for ASCII text, Arrow's compute kernels otherwise, then dictionary encoding — so no Python
object is created per token, and a million documents take seconds.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp

from arecall.core.ragged import offsets

__all__ = ["TOKEN_PATTERN", "SeedTfidf", "encode", "l2_normalize_rows", "tokenize"]

TOKEN_PATTERN = r"[a-z0-9]+"


def _ascii_table() -> np.ndarray:
    table = np.full(256, ord(" "), dtype=np.uint8)
    for byte in b"abcdefghijklmnopqrstuvwxyz0123456789":
        table[byte] = byte
    for byte in b"ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        table[byte] = byte + 32
    return table


_ASCII = _ascii_table()


def tokenize(texts: Sequence[str]) -> tuple[np.ndarray, pa.Array]:
    """Every ``[a-z0-9]+`` token of the lower-cased texts, with the index of its text.

    ASCII text takes a byte-table fast path (upper → lower case, anything else → space, then a
    whitespace split); text with any non-ASCII byte goes through Unicode lower-casing and a regex
    split, because some non-ASCII characters lower-case to ASCII letters (the Kelvin sign → k).

    Examples
    --------
    >>> rows, tokens = tokenize(["Red-apple 2", "", "x"])
    >>> rows.tolist(), tokens.to_pylist()
    ([0, 0, 0, 2], ['red', 'apple', '2', 'x'])
    >>> tokenize(["ß \u212a9"])[1].to_pylist()
    ['k9']
    """
    array = pa.array(texts, type=pa.large_string())
    _, offsets, data = array.buffers()
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    if array.offset == 0 and array.null_count == 0 and not (raw >= 0x80).any():
        mapped = pa.LargeStringArray.from_buffers(len(array), offsets, pa.py_buffer(_ASCII[raw]))
        pieces = pc.ascii_split_whitespace(mapped)
    else:
        pieces = pc.split_pattern_regex(pc.utf8_lower(array), pattern=r"[^a-z0-9]+")
    rows = pc.list_parent_indices(pieces).to_numpy()
    flat = pc.list_flatten(pieces)
    keep = pc.greater(pc.utf8_length(flat), 0)
    return rows[keep.to_numpy(zero_copy_only=False)], flat.filter(keep)


#: Texts below this many are encoded in one piece (threads cost more than they save).
PARALLEL_MIN = 20_000


def _encode_part(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    rows, tokens = tokenize(texts)
    encoded = pc.dictionary_encode(tokens)
    return rows, encoded.indices.to_numpy().astype(np.int64), encoded.dictionary


def encode(
    texts: Sequence[str], parts: int | None = None
) -> tuple[np.ndarray, np.ndarray, pa.Array]:
    """Every token's text index and vocabulary code, the vocabulary in first-appearance order.

    Exactly ``tokenize`` then Arrow's ``dictionary_encode`` — the same codes, the same
    vocabulary — but the texts are split into ``parts`` consecutive pieces encoded in threads
    (Arrow's kernels release the GIL; default: one per core, at most 2, for `PARALLEL_MIN`
    texts or more), then the pieces' vocabularies are merged: a later piece's new words are
    appended in its own first-appearance order, which is the whole text's.

    Examples
    --------
    >>> rows, codes, vocabulary = encode(["b a", "c b", "a"], parts=2)
    >>> rows.tolist(), codes.tolist(), vocabulary.to_pylist()
    ([0, 0, 1, 1, 2], [0, 1, 2, 0, 1], ['b', 'a', 'c'])
    """
    if parts is None:
        parts = min(2, os.cpu_count() or 1) if len(texts) >= PARALLEL_MIN else 1
    step = max(1, -(-len(texts) // max(parts, 1)))
    starts = list(range(0, len(texts), step)) or [0]
    if len(starts) == 1:
        return _encode_part(texts)
    with ThreadPoolExecutor(len(starts)) as pool:
        pieces = list(pool.map(_encode_part, [texts[a : a + step] for a in starts]))
    vocabulary = pieces[0][2]
    all_rows, all_codes = [pieces[0][0]], [pieces[0][1]]
    for start, (rows, codes, words) in zip(starts[1:], pieces[1:], strict=True):
        found = pc.fill_null(pc.index_in(words, value_set=vocabulary), -1).to_numpy()
        mapping = found.astype(np.int64)
        new = mapping < 0
        mapping[new] = len(vocabulary) + np.arange(int(new.sum()))
        vocabulary = pa.concat_arrays([vocabulary, words.filter(pa.array(new))])
        all_rows.append(rows + start)
        all_codes.append(mapping[codes])
    return np.concatenate(all_rows), np.concatenate(all_codes), vocabulary


def l2_normalize_rows(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """Rows scaled to unit L2 norm (all-zero rows kept), bit for bit as scikit-learn's.

    The squares are summed in each row's stored order, one position at a time across all rows,
    which is the order of scikit-learn's ``normalize(norm="l2")`` loop — so the document vectors,
    and every score and tie, are identical — without importing scikit-learn (over a second).

    Examples
    --------
    >>> m = l2_normalize_rows(sp.csr_matrix([[3.0, 0.0, 4.0], [0.0, 0.0, 0.0]]))
    >>> m.toarray().tolist()
    [[0.6, 0.0, 0.8], [0.0, 0.0, 0.0]]
    """
    out = sp.csr_matrix(matrix, dtype=np.float64, copy=True)
    lengths = np.diff(out.indptr)
    squares = out.data * out.data
    total = np.zeros(out.shape[0])
    rows = np.arange(out.shape[0])
    for j in range(int(lengths.max(initial=0))):
        rows = rows[lengths[rows] > j]
        total[rows] += squares[out.indptr[rows] + j]
    norm = np.sqrt(total)
    norm[total == 0.0] = 1.0
    out.data /= np.repeat(norm, lengths)
    return out


def _sublinear(counts: sp.csr_matrix) -> sp.csr_matrix:
    weighted = counts.astype(np.float64)
    weighted.data = 1.0 + np.log(weighted.data)
    return weighted


class SeedTfidf:
    """TF-IDF cosine retrieval with authorized-recall 0.1.0's weighting.

    Examples
    --------
    >>> r = SeedTfidf().fit(["red apple", "green apple", "blue sky"])
    >>> np.round(r.score(["apple pie"]).toarray(), 4).tolist()
    [[0.4781, 0.4781, 0.0]]
    """

    @classmethod
    def from_config(cls, cfg: Any) -> SeedTfidf:
        """Build from the ``retriever`` section (`TfidfConfig`: nothing of its own to set)."""
        return cls()

    def fit(self, documents: Sequence[str]) -> SeedTfidf:
        rows, codes, self._vocabulary = encode(documents)
        shape = (len(documents), len(self._vocabulary))
        # tokens come in text order: CSR straight from the codes, without COO's copies
        indptr = offsets(np.bincount(rows, minlength=shape[0]))
        del rows
        counts = sp.csr_matrix((np.ones(len(codes)), codes.astype(np.int32), indptr), shape=shape)
        del codes
        counts.sum_duplicates()  # sorts each row's terms and counts repeats, as COO → CSR does
        n = shape[0]
        df = np.bincount(counts.indices, minlength=shape[1])
        self._idf = np.log((n + 1) / (df + 1.0)) + 1.0
        docs = l2_normalize_rows(_sublinear(counts) @ sp.diags(self._idf))
        self._terms_by_docs = docs.T.tocsr()  # transposed once, not on every score() call
        return self

    def score(self, queries: Sequence[str]) -> sp.csr_matrix:
        rows, tokens = tokenize(queries)
        codes = pc.index_in(tokens, value_set=self._vocabulary).to_numpy(zero_copy_only=False)
        seen = ~np.isnan(codes.astype(np.float64))
        shape = (len(queries), len(self._vocabulary))
        counts = sp.csr_matrix(
            (np.ones(int(seen.sum())), (rows[seen], codes[seen].astype(np.int64))), shape=shape
        )
        counts.sum_duplicates()
        weighted = _sublinear(counts) @ sp.diags(self._idf)
        sq_norm = np.asarray(weighted.multiply(weighted).sum(axis=1)).ravel()
        # unseen terms: idf 1.0, present only in the norm
        unseen = pc.dictionary_encode(tokens.filter(pa.array(~seen)))
        n_unseen = max(len(unseen.dictionary), 1)
        keys, count = np.unique(
            rows[~seen] * n_unseen + unseen.indices.to_numpy(), return_counts=True
        )
        sq_norm += np.bincount(
            keys // n_unseen, weights=(1.0 + np.log(count)) ** 2, minlength=len(queries)
        )
        norm = np.sqrt(sq_norm)
        norm[norm == 0] = 1.0
        return (sp.diags(1.0 / norm) @ weighted @ self._terms_by_docs).tocsr()

    def document_shard(self, start: int, stop: int) -> SeedTfidf:
        """This fitted retriever restricted to documents ``start:stop`` (their columns of
        `score`, the same numbers; global statistics such as the idf stay the whole corpus's):
        one document shard of the rank stage (`arecall.core.rank_blocks`)."""
        shard = copy.copy(self)
        shard._terms_by_docs = self._terms_by_docs[:, start:stop]
        return shard
