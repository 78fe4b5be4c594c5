from django.contrib import admin
from django.urls import include, path

from shop.views import order_status, place_order, start_sum, sum_result

urlpatterns = [
    path("orders/", place_order),
    path("orders/<int:order_id>", order_status),
    path("sums/", start_sum),
    path("sums/<str:result_id>", sum_result),
    path("admin/", admin.site.urls),  # staff sign in here (settings.LOGIN_URL)
    path("wurk/", include("wurk.contrib.django.urls")),
]
