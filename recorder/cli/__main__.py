"""``python -m a2a_tape.recorder.cli``: the ``a2a-tape`` command line, as the console script runs it."""

from . import main

main()
