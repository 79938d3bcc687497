"""The security suite (issue 28): each test reproduces one way trialrun was attacked or crashed.

Every test here failed on the code before its fix. Tests are grouped by the promise they guard:
secrets never reach disk, workspaces are never lost, local servers hold under abuse, receipts
accept only what was signed, bad files and crashes end in one clear line.
"""
