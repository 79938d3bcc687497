"""trialrun: deterministic CI and trustworthy evaluation for tool-using AI agents."""

__version__ = "0.1.0"

__all__ = ["__version__"]
