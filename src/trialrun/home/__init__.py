"""The trialrun home directory shared by ``compare`` runs and the ``team`` cache.

Where stored runs live and the content digests that name them; both ``compare`` and ``team``
build on this.
"""
