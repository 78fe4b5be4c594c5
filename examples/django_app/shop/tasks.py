try:
    from django.tasks import task
except ImportError:  # Django 5.2 with the django-tasks backport
    from django_tasks import task

from shop.models import Order


@task
def add(a, b):
    return a + b


@task(queue_name="mail", job_options={"retry": 5, "tags": ["greetings"]})
def greet(name, punctuation="!"):
    return f"Hello {name}{punctuation}"


@task
async def count_orders():
    return await Order.objects.acount()
