"""Any HTTP(S) API recorded and replayed, through a recording proxy with a per-run authority.

``proxy.HttpRecorder`` is the run's server; ``traffic.CaseTraffic`` one case's exchanges;
``matching`` decides which recording answers a request; ``cassette`` reads and writes the
files; ``exchange`` is the exchange model and its redaction; ``authority`` the run's CA.
``jsonl``, ``matching.Recordings``, ``difference`` and ``arrivals`` are also the model
gateway's core (cassette lines, consume-once replay, miss wording, record order).
The modules are imported by name (nothing here), so a run without HTTP traffic loads only
what it uses.
"""
