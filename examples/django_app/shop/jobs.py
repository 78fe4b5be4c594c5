import wurk

from shop.models import Order


class ReceiptJob(wurk.Job, queue="mail"):
    def perform(self, order_id):
        order = Order.objects.get(pk=order_id)  # committed before the job was pushed
        order.receipt_sent = True
        order.save(update_fields=["receipt_sent"])
