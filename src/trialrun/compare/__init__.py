"""`trialrun compare` building blocks: arms, rows, judge, statistics and digests (seed 003).

Landed so far, each self-contained and tested: ``config`` (compare.yaml, cases, session and
triggers with file:line errors), ``digest`` (content and eval-asset digests), ``judge`` (the
judge protocol asked in both orders, failures as ties), ``rows`` (the four rules that decide a row)
and ``stats`` (net lift, verdict band, sign test, Tango and Wilson intervals, case-level test).
The arms runner, the report, the receipt, the local store and the CLI come next.
"""
