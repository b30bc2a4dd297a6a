"""``python -m poslab ...``: the ``poslab`` command line (:mod:`poslab.cli`)."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="poslab")
