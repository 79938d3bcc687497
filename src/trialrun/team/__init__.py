"""The team store: a plain git repository where a team shares subject versions and receipts.

Layout: ``subjects/<id>/v<N>/...`` (the published bytes, minus ``evals/``) and
``evals/<id>/v<N>/<run_id>.json`` (receipts stamped with ``skill_id`` and ``version``). Every
write is a commit pushed to the team; ``store.py`` owns the git plumbing, ``publish.py`` the
decisions of ``trialrun publish`` and of the commit that follows a compare.
"""
