"""Tests of ``arecall.data``."""
