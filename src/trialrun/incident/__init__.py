"""Production incident replay: turn a production trace into a redacted, replayable case.

``model`` holds the normalized incident (ordered tool calls with arguments, results or errors
and timing, the input, the final output, and what the source did not capture); ``importers``
reads each supported export format into it; ``rules`` checks business rules on the calls.
An incident whose arguments or results were not captured is *inconclusive*, never passing.
"""
