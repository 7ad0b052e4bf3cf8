"""The ACP surface: JSON-RPC framing, the stdio reference agent, and the official SDK adapter."""
