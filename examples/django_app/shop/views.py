from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from shop.jobs import ReceiptJob
from shop.models import Order


@csrf_exempt
def place_order(request):
    with transaction.atomic():
        order = Order.objects.create(item=request.POST["item"])
        jid = ReceiptJob.perform_async(order.pk)  # the jid now, the push at the commit
        if request.POST.get("cancel"):
            transaction.set_rollback(True)  # rolled back: the push is dropped too
    return JsonResponse({"order": order.pk, "jid": jid})


def order_status(request, order_id):
    order = Order.objects.filter(pk=order_id).first()
    if order is None:
        return JsonResponse({"order": order_id, "found": False}, status=404)
    return JsonResponse({"order": order.pk, "item": order.item, "receipt_sent": order.receipt_sent})
