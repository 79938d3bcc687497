"""The logic of commands that belong to no single layer (doctor, init, verify).

``trialrun.cli`` parses options, calls these and prints; the work is done here.
"""
