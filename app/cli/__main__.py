"""`python -m app.cli` runs the command line (the worker tests start it this way)."""

from app.cli import main

main()
