"""ASGI entry point for uvicorn (`app.asgi:app`).

Each uvicorn worker process imports this module, so logging is set up here: JSON lines, secrets
redacted, in every worker (the `gpufit serve` parent configures only itself), and so is the
interpreter: garbage collector and thread switching (app.core.server_tuning).
"""

from app.core.logging_setup import configure_logging
from app.core.server_tuning import tune_for_server
from app.core.settings import get_settings
from app.main import create_app

_settings = get_settings()
configure_logging(_settings.log_level, _settings)
app = create_app(_settings)
tune_for_server()  # after imports: what they built is frozen out of every later collection
