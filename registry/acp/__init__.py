"""The ACP surface: JSON-RPC framing (``jsonrpc``), the method table (``methods``: each method declared once, with
its params struct from ``params``, its capability, its handler and what each surface does with it), prompt content
blocks (``content``), and the surfaces built from the table: the stdio reference agent (``agent``) and the official
SDK adapter (``sdk``).

``jsonrpc``, ``params``, ``methods`` and ``content`` never import the ``SessionRegistry`` facade, which delegates
its ``handle`` to ``methods``; ``agent`` and ``sdk`` are built on it.
"""
