"""``python -m trialrun``."""

from trialrun.cli import main

if __name__ == "__main__":
    main()
