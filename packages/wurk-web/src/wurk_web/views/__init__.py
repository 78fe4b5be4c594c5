"""The JSON routes behind the dashboard's own pages, one module per area.

Each handler takes a :class:`wurk_web.request.DashboardRequest` and returns
a JSON-serialisable value; every read and every action goes through the data
API (``wurk.api``, ``wurk.metrics``) on the dashboard's pool, so an action
here changes Redis exactly as the same call in a script would.
"""
