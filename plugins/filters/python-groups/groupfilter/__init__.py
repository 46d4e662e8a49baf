"""kmirror filter plugin in Python: which consumer groups sync (see README.md)."""
