"""Tests of ``arecall.retrievers``."""
