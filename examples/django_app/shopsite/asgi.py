"""The project served by an ASGI server: ``uvicorn shopsite.asgi:application``."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
application = get_asgi_application()
