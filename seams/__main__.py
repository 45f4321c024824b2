"""`python -m seams` is the `seams` command."""

from seams.orchestration.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
