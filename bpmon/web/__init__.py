"""The server (``bpmon serve``: FastAPI under uvicorn) and, later, the dashboard: a surface.

The web layer stands on the service layer and the model, with the web extra's libraries
(fastapi, uvicorn, prometheus-client); never on the runtime, the collectors, the rules or the
history directly (import-linter's contracts in pyproject.toml hold it).
"""
