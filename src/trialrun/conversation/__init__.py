"""The harness side of the agent conversation: the wire protocol, the agent's process, a session.

The SDK that agents import to speak this protocol is ``trialrun.agent``; nothing here is imported
by agents.
"""
