"""``trialrun attempt``: a coding agent works on a goal under a verifier, with rollback."""
