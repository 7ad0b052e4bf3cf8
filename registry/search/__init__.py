"""Finding sessions by what was said in them: the query language (``query``), the full-text index derived from the
messages kept beside the log (``index``; PostgreSQL's in ``postgres``), its signed cursors (``cursor``) and the
search itself (``hits``). ``SessionRegistry.search`` is the way in."""
