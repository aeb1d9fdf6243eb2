"""Every reader and writer of a file format, one per format.

Readers are strict: a bad line is one `ArecallError` naming ``file: line N``. They share one text
layer (`arecall.io.text`) so BOM, CRLF, gzip, comments, blank lines and header lines are handled
identically whichever entry point opens the file. Writers are atomic (`arecall.io.atomic`).
"""
