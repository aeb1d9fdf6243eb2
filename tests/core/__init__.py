"""Tests of ``arecall.core``."""
