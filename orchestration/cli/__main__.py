"""`python -m seams.orchestration.cli` is the `seams` command too."""

from seams.orchestration.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
