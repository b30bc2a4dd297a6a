"""``python -m poslab ...``: the ``poslab`` command line (:mod:`poslab.cli`)."""

from .cli import entry

if __name__ == "__main__":
    entry()
