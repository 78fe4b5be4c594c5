from django.db import transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from shop.jobs import ReceiptJob
from shop.models import Order
from shop.tasks import add


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


@csrf_exempt
def start_sum(request):
    result = add.enqueue(int(request.POST["a"]), int(request.POST["b"]))  # a django.tasks task
    return JsonResponse({"id": result.id, "status": result.status})


def sum_result(request, result_id):
    result = add.get_result(result_id)  # from Redis: any process may ask
    done = result.status == "SUCCESSFUL"
    return JsonResponse({"id": result.id, "status": result.status, "sum": result.return_value if done else None})
