"""Run Receipt v0: write, sign and verify tamper-evident JSONL run records."""
