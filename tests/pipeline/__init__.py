"""Tests of ``arecall.pipeline``."""
