"""Running a suite: preflight, the services an agent needs, shards and the case runner."""
