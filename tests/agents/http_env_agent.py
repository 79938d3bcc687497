"""HTTP agent that also reports its proxy and CA variables: ``{"env": {NAME: VALUE}, "results":
[[status, body], ...]}``, each URL of its task input fetched with urllib (see http_agent.py).

Task input: ``{"urls": [URL, ...]}``.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request

from _jsonl import final, task_input

NAMES = ("HTTPS_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
NAMES += ("NODE_EXTRA_CA_CERTS",)

results = []
for url in task_input()["urls"]:
    try:
        with urllib.request.urlopen(url, timeout=60) as answer:
            results.append([answer.status, answer.read().decode("utf-8")])
    except urllib.error.HTTPError as exc:
        results.append([exc.code, exc.read().decode("utf-8")])
    except (urllib.error.URLError, OSError) as exc:
        results.append([0, str(getattr(exc, "reason", exc))])
final({"env": {name: os.environ.get(name) for name in NAMES}, "results": results})
