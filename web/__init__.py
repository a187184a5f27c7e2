"""The browser arena (DESIGN section 17): people play player 1 against any spec in a web page.

A thin facade over the ``extrarlhf`` core, like ``mcp_server``: the same live-match registry
(``extrarlhf.runtime.live``), the same matches and traces (actor type ``human``, battle tag
``human-vs-bot`` / ``human-vs-rl``), server-rendered HTML (Starlette + Jinja2, plain forms, no
JavaScript needed). The page only ever gets player 1's view (``State.player_view(1)``); the
opponent's hand is a count. Imports ``extrarlhf``, ``engine`` (action ids, card shapes) and
``adapters.work`` (the rollout cap's scope); the core never imports this package (import-linter
contracts in pyproject.toml). Modules:

- config.py    ``ArenaConfig``: directories, limits, the access token and the cookie secret;
               ``check_bind`` (loopback by default, a token to expose it)
- arena.py     ``Arena``: the browser sessions' matches over one ``MatchRegistry`` (start,
               move, continue, abandon, finish; think times with provenance ``arena``;
               player names as keyed pseudonyms); no cross-talk between sessions
- views.py     the template context of a view: hand, boards and heroes with the legal
               actions attached to the card or target they concern; the replay steps
- security.py  ASGI middleware: bounded request bodies (413), the access-token gate (403);
               the per-session CSRF token
- app.py       ``build_app``: routes, error pages (never a traceback), the worker threads
- serve.py     ``serve``: uvicorn on the configured host and port (``python -m extrarlhf arena``)
- templates/   Jinja2 pages (autoescaped); static/ the stylesheet
"""
