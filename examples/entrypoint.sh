#!/bin/sh
# The container's entrypoint: one image, several roles, chosen by the first
# argument; the rest are passed to the command (e.g. "worker -t 20").
#
# Every branch ends in `exec`, so that the worker replaces this shell and is
# PID 1: it then receives the TERM of `docker stop` or of Kubernetes itself.
# A shell that stayed in between would not pass TERM on, and the jobs would
# be killed when the grace period ran out instead of finishing.
set -eu

role="${1:-worker}"
[ "$#" -gt 0 ] && shift

case "$role" in
    worker)
        # The swarm: WURK_COUNT worker processes forked from one parent.
        exec wurkswarm -r app.py -e "${APP_ENV:-production}" "$@"
        ;;
    single)
        # One worker process, for a container that scales by replicas instead.
        exec wurk -r app.py -e "${APP_ENV:-production}" "$@"
        ;;
    *)
        # Anything else runs as given: a shell, `wurk stats`, a migration.
        exec "$role" "$@"
        ;;
esac
