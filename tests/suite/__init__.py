"""The test suite itself: it ends cleanly and its layout mirrors the code."""
