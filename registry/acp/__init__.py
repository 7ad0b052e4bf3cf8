"""The ACP surface: JSON-RPC framing (``jsonrpc``), the registry's method table (``methods``), prompt content
blocks (``content``), the stdio reference agent (``agent``) and the official SDK adapter (``sdk``).

``jsonrpc``, ``methods`` and ``content`` never import the ``SessionRegistry`` facade, which delegates its
``handle`` to ``methods``; ``agent`` and ``sdk`` are built on it.
"""
