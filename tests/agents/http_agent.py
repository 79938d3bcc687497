"""HTTP agent: fetches each URL of its task input with urllib, as any script would (the proxy
and CA variables decide where it goes), and returns ``{"results": [[status, body], ...]}``.

Task input: ``{"urls": [URL, ...], "token": SECRET}``; the token goes out as a bearer header.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from _jsonl import final, task_input

value = task_input()
results = []
for url in value["urls"]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {value['token']}"})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            results.append([answer.status, answer.read().decode("utf-8")])
    except urllib.error.HTTPError as exc:
        results.append([exc.code, exc.read().decode("utf-8")])
    except urllib.error.URLError as exc:
        results.append([0, str(exc.reason)])
final({"results": results})
