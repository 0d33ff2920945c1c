"""``python -m a2a_tape.cli``: the ``a2a-tape`` command line, as the console script runs it."""

from a2a_tape.cli import main

main()
