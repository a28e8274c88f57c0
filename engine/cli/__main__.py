"""`python -m engine.cli ...` runs hp-plan."""

from engine.cli import console

if __name__ == "__main__":
    console()
