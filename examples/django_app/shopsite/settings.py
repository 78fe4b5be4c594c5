import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("SECRET_KEY", "only-for-the-example")
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "shopsite.urls"
USE_TZ = True

INSTALLED_APPS = [
    "wurk.contrib.django",  # first: a worker is marked as one before the other apps load
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "shop",
]
try:
    import django.tasks  # noqa: F401  (Django >= 6.0)
except ImportError:
    INSTALLED_APPS.append("django_tasks")  # the backport, on Django 5.2

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
STATIC_URL = "static/"
LOGIN_URL = "/admin/login/"  # staff sign in to the dashboard through the admin's page

# The web process and the workers share one SQLite file: wait for a lock rather than fail.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("DATABASE_PATH", BASE_DIR / "db.sqlite3"),
        "OPTIONS": {"timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# What config/wurk.yml would hold: the same keys, an environment's section included.
WURK = {
    "concurrency": 2,
    "queues": ["default", "mail"],
    "redis": {"url": os.environ.get("REDIS_URL", "redis://localhost:6379/0")},
    "production": {"concurrency": 10},
}

TASKS = {
    "default": {
        "BACKEND": "wurk.contrib.django.backend.WurkBackend",
        "QUEUES": ["default", "mail"],
        "OPTIONS": {"RESULT_TTL": 3600, "JOB_OPTIONS": {"retry": 3}},
    }
}
