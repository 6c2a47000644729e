"""The first lines of a repro file's code: where the file lives, and a ``sys.path`` that holds
nothing planted beside it."""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if __name__ == "__main__":
    # Python puts a script's directory first on sys.path: a file planted beside this one
    # (math.py, inspect.py, ...) must not stand in for the standard library or torch.
    sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != HERE]
