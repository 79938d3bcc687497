"""A small MCP server with one tool, search_docs (needs `pip install mcp`).

trialrun starts it only in record mode; replay answers from the recorded cassette.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("docs", version="1.0.0")

ARTICLES = {
    "reset password": "Use 'Forgot password' on the sign-in page; the link is valid for 1 hour.",
    "billing": "Invoices are under Settings > Billing.",
}


@server.tool()
def search_docs(q: str) -> dict:
    """Search the help center."""
    hits = [{"title": title, "text": text} for title, text in ARTICLES.items() if q in title]
    return {"query": q, "hits": hits}


if __name__ == "__main__":
    server.run()
