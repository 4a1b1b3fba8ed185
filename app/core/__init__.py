"""Settings, errors, logging, metrics, security, request deps; imports nothing else of the app."""
