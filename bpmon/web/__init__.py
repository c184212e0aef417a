"""The web dashboard (FastAPI + plotly): a surface, may import everything below it."""
