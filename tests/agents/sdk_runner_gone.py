"""An SDK agent whose runner goes away during a tool call: it reports the ChannelError and exits 7.

The runner (the test) resets the channel or closes it; either way ``call_tool`` must raise a
``ChannelError`` that says so, never a bare ``ConnectionResetError``.
"""

import sys

from trialrun.agent import ChannelError, connect

session = connect()
assert session is not None, "run me with TRIALRUN_FD set"
try:
    session.call_tool("lookup", {"q": session.input})
except ChannelError as exc:
    print(f"agent saw: {exc}", file=sys.stderr)
    sys.exit(7)
print("agent: the call unexpectedly succeeded", file=sys.stderr)
