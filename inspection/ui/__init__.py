"""The HTML views of the log: ``a2a-tape ui`` (a live local web app) and ``export --format html``.

Both render the same templates (:mod:`.render`, ``templates/``) from the same rows (:mod:`.rows`);
the app (:mod:`.app`) adds what only a live page has: paging by key, the scrubber, the follower's
events by SSE. Importing this package imports neither starlette nor jinja2: the export never
loads the server, and ``a2a-tape --help`` neither.
"""
