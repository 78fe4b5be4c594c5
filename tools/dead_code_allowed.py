"""Names the dead-code finder cannot see used, each kept on purpose.

``tests/foundation/test_dead_code.py`` runs vulture over every distribution's
source with the tests, the docs' examples and the benchmarks as its users;
what it reports under ``packages/`` must be listed here, grouped by why it
stays. A name that is really dead is deleted instead.
"""

# ruff: noqa: B018, F821
# fmt: off

# Called by name from outside Python's view: pluggy hook implementations and
# specifications (dispatched by event name), click commands, pytest fixtures.
wurk_job_outcome
wurk_exit
wurk_before_fork
wurk_fork
wurk_shutdown
wurk_heartbeat
wurk_leader
wurk_leader_lost
wurk_startup
wurk_quiet
wurk_beat
job_show
job_retry
job_delete
job_kill
list_command
fire_command
enqueue_command
history_command
wurk_fake
wurk_inline
_demo_pace  # a @wurk.configure_server callback of the demo app

# The standard library calls these: http.server's handler and server
# attributes, and the Mapping protocol of the swarm's memory view.
_.do_GET
do_DELETE
do_PATCH
do_POST
do_PUT
_.log_message
allow_reuse_port
daemon_threads
_.server_name
_.server_port
__contains__
__getitem__

# redis-py reads it after a fork (its pool's own lock, replaced in the child).
_._fork_lock

# Public names with Sidekiq's meaning, for users' code: ``perform_sync``
# (Sidekiq's alias of ``perform_inline``), ``set_options`` (its
# ``sidekiq_options`` after the class is defined), an iterable job's
# ``current_object`` (documented in docs/iterable-jobs.md).
perform_sync
_.set_options
current_object
_.current_object

# The Lua reply codes of a batch's books, named together though the code
# compares only one of them.
GONE
UNFINISHED

# Imported for a string annotation under TYPE_CHECKING.
EncodableT
FieldT

# Read by Django by name: the app's AppConfig and its attributes, a management
# command's hooks, a URLconf's patterns, a task backend's declared
# capabilities and task class, and a database connection's reconnect time.
WurkConfig
verbose_name
task_class
supports_defer
supports_async_task
supports_get_result
supports_priority
_.close_at
help
_.run_from_argv
_.print_help
_.add_arguments
urlpatterns

# The management command's parser takes its class by assignment: Django's
# create_parser builds a CommandParser, and call_command's words must reach
# wurk's own parser untouched.
_.__class__

# The health port's request handler: attributes and a method the standard
# library's BaseHTTPRequestHandler reads by name (its Server header, its
# error page, whether to close the connection).
server_version
sys_version
send_error
_.close_connection
