"""Tests of ``arecall.tracking``."""
