"""Plain data and utilities: the bottom layer, which imports no other trialrun package.

Results records, canonical JSON, redaction, atomic file writes, git state, did-you-mean, the
assertion-plugin contract and small helpers that every layer above may use.
"""
