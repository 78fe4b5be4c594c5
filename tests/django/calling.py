"""Run inside the example project: ``call_command("wurk", ...)`` from Python code.

python calling.py words      a worker: call_command("wurk", "-q", "critical", "-c", "2")
python calling.py keywords   a worker: call_command("wurk", queue=["critical"], concurrency=2)
python calling.py others     a subcommand, its output, a refusal and an unknown option, as JSON

A worker's call returns when the worker is stopped, and the script then says "returned".
"""

import io
import json
import os
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shopsite.settings")
django.setup()

from django.core.management import CommandError, call_command  # noqa: E402

mode = sys.argv[1]
if mode == "words":
    call_command("wurk", "-q", "critical", "-c", "2")
    print("returned", flush=True)
elif mode == "keywords":
    call_command("wurk", queue=["critical"], concurrency=2)
    print("returned", flush=True)
elif mode == "others":
    seen = {}
    call_command("wurk", "pause", "mail")
    output = io.StringIO()
    call_command("wurk", "stats", "--json", stdout=output)
    seen["stats"] = json.loads(output.getvalue())
    try:
        call_command("wurk", "-q", "queue:mail")
    except CommandError as exc:
        seen["refused"] = [exc.returncode, str(exc)]
    try:
        call_command("wurk", concurency=2)
    except TypeError as exc:
        seen["unknown"] = str(exc)
    print(json.dumps(seen))
