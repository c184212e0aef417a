"""The server (``bpmon serve``: FastAPI under uvicorn) and, later, the dashboard: a surface.

May import the service layer (:mod:`bpmon.service.facade`, :mod:`bpmon.service.watching`) and the
model, and the web extra's libraries (fastapi, uvicorn, prometheus-client); never the runtime, the
collectors, the rules or the history directly.
"""
