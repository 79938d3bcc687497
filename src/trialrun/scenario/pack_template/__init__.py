"""The support-agent pack shipped by ``trialrun scenario init``.

A package only so trialrun imports ``scenario_world`` from the very file the pack carries; ``init``
copies every file here except this one.
"""
