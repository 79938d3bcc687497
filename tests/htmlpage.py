"""Reading a report page as a browser would, and what an agent may try to smuggle into one."""

from __future__ import annotations

from html.parser import HTMLParser

PAYLOADS = (
    "<img src=x onerror=alert(document.domain)>",
    "</script><script>alert(2)</script>",
    "<!--<script>",
)


class Collector(HTMLParser):
    """Records every element, comment and script body the browser would build."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []
        self.comments: list[str] = []
        self.scripts: list[str] = []
        self.text: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.extend(attrs)
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data
        else:
            self.text.append(data)


def parse(page: str) -> Collector:
    collector = Collector()
    collector.feed(page)
    collector.close()
    return collector
