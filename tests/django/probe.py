"""Run inside the example project (docs/django.md): one action, its outcome as JSON.

python probe.py order ITEM [cancel]   a POST to the view, through Django's test client
python probe.py add A B               enqueue the add task; its result
python probe.py greet NAME            enqueue the greet task with a keyword argument
python probe.py add-undone A B        enqueue the add task in a transaction that rolls back
python probe.py count                 enqueue the async count_orders task
python probe.py enqueue PATH          enqueue the task at a dotted path, with no arguments
python probe.py result-of PATH ID     that task's result, read back through Django's API
python probe.py count-result ID       its result, read back through Django's API
python probe.py result ID             the add task's result, read back through Django's API
python probe.py dashboard             the dashboard as anonymous, non-staff and staff users see it
python probe.py fork                  whether a forked child still holds the parent's connection
"""

import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
django.setup()


def result_json(result):
    try:
        value = result.return_value
    except ValueError:
        value = None
    return {
        "id": result.id,
        "status": str(result.status),
        "return_value": value,
        "attempts": result.attempts,
        "args": result.args,
        "kwargs": result.kwargs,
        "errors": len(result.errors),
    }


def main(action, *args):
    from django.test import Client

    if action == "order":
        data = {"item": args[0], **({"cancel": "1"} if "cancel" in args else {})}
        response = Client().post("/orders/", data)
        return {"status": response.status_code, **response.json()}
    if action == "add":
        from shop.tasks import add

        return result_json(add.enqueue(int(args[0]), int(args[1])))
    if action == "add-undone":
        from django.db import transaction

        from shop.tasks import add

        class Undo(Exception):
            pass

        try:
            with transaction.atomic():
                enqueued = add.enqueue(int(args[0]), int(args[1]))
                raise Undo
        except Undo:
            return result_json(enqueued)
    if action in ("enqueue", "result-of"):
        from importlib import import_module

        module, _, name = args[0].rpartition(".")
        task = getattr(import_module(module), name)
        if action == "enqueue":
            return result_json(task.enqueue())
        result = task.get_result(args[1])
        result.refresh()
        return result_json(result)
    if action == "count":
        from shop.tasks import count_orders

        return result_json(count_orders.enqueue())
    if action == "count-result":
        from shop.tasks import count_orders

        result = count_orders.get_result(args[0])
        result.refresh()
        return result_json(result)
    if action == "greet":
        from shop.tasks import greet

        return result_json(greet.enqueue(args[0], punctuation="?"))
    if action == "result":
        from shop.tasks import add

        result = add.get_result(args[0])
        before = result.status
        result.refresh()
        return {**result_json(result), "before_refresh": str(before)}
    if action == "dashboard":
        from django.contrib.auth.models import User

        User.objects.create_user("clerk", password="pw")
        User.objects.create_user("boss", password="pw", is_staff=True)
        anonymous = Client().get("/wurk/queues")
        clerk = Client()
        clerk.login(username="clerk", password="pw")
        boss = Client()
        boss.login(username="boss", password="pw")
        page = boss.get("/wurk/queues")
        return {
            "anonymous": [anonymous.status_code, anonymous.get("Location", "")],
            "clerk": clerk.get("/wurk/queues").status_code,
            "staff": page.status_code,
            "base": '<base href="/wurk/">' in page.content.decode(),
            "queues": boss.get("/wurk/api/queues").json(),
            "pause": boss.post("/wurk/api/queues/mail/pause", "{}", content_type="application/json").status_code,
        }
    if action == "fork":
        from django.db import connection

        connection.ensure_connection()
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, b"dropped" if connection.connection is None else b"kept")
            os._exit(0)
        os.waitpid(pid, 0)
        child = os.read(read, 100).decode()
        return {
            "child": child,
            "parent_still_connected": connection.connection is not None,
            "parent_works": connection.cursor().execute("select 1").fetchone()[0],
        }
    raise SystemExit(f"unknown action {action}")


print(json.dumps(main(*sys.argv[1:])))
