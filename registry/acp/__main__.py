"""``python -m registry.acp --store URL``: the stdio agent (the same as ``acp-registry serve``)."""

from __future__ import annotations

import argparse
import sys

from registry.acp.agent import serve


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m registry.acp", description=__doc__)
    parser.add_argument("--store", required=True, help="store URL, e.g. sqlite:///home/me/sessions.db")
    parser.add_argument("--page-size", type=int, default=50)
    args = parser.parse_args()
    return serve(args.store, page_size=args.page_size)


if __name__ == "__main__":
    sys.exit(main())
