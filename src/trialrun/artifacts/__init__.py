"""What a run leaves behind: its run directory, recording, baselines, shard merges and diffs."""
