"""The dashboard's URLconf: include it where the dashboard should live::

    urlpatterns = [
        path("wurk/", include("wurk.contrib.django.urls")),
        ...
    ]

Who may see it is ``settings.WURK_DASHBOARD_ACCESS`` (staff users by default;
see :mod:`wurk.contrib.django.views`).
"""

from __future__ import annotations

from django.urls import re_path

from wurk.contrib.django.views import dashboard

app_name = "wurk"
urlpatterns = [re_path(r"^(?P<path>.*)$", dashboard, name="dashboard")]
