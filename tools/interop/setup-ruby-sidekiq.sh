#!/bin/sh
# Build (or refresh) a Debian chroot holding a packaged Ruby Sidekiq and its Web UI,
# for the wire-compatibility tests in tests/interop.
#
#   WURK_INTEROP_CHROOT   where the chroot lives (default /srv/forky)
#   WURK_INTEROP_SUITE    Debian suite to bootstrap (default forky, which ships Sidekiq 8.1.x)
#
# Safe to run again: the bootstrap and the package installation are skipped when the chroot
# already loads Sidekiq; the Ruby application files under /opt/interop are always rewritten.
# Needs root. Package maintainer scripts are never allowed to start services.
set -eu

CHROOT="${WURK_INTEROP_CHROOT:-/srv/forky}"
SUITE="${WURK_INTEROP_SUITE:-forky}"
WORKDIR="${TMPDIR:-/tmp}/wurk-interop-debootstrap"
PACKAGES="ruby ruby-sidekiq ruby-rack-session ruby-rackup ruby-webrick redis-tools curl"
START=$(date +%s)

say() { printf '[interop-setup] %s\n' "$*"; }

if [ "$(id -u)" != 0 ]; then
    say "must run as root (debootstrap and chroot)" >&2
    exit 1
fi

# The Debian mirror is whatever this host's apt already uses.
host_mirror() {
    if [ -r /etc/apt/sources.list.d/debian.sources ]; then
        awk '$1 == "URIs:" { print $2; exit }' /etc/apt/sources.list.d/debian.sources
        return
    fi
    grep -hE '^deb[[:space:]]' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        grep -v security | awk '{ for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }'
}

chroot_ready() {
    [ -x "$CHROOT/usr/bin/ruby" ] &&
        chroot "$CHROOT" ruby -e 'require "sidekiq"; require "sidekiq/web"; require "rack/session"; require "rackup"' \
            >/dev/null 2>&1
}

MOUNTED_PROC=""
cleanup() {
    if [ -n "$MOUNTED_PROC" ]; then
        umount "$CHROOT/proc" 2>/dev/null || true
    fi
}
trap cleanup EXIT INT TERM

ensure_proc() {
    if ! mountpoint -q "$CHROOT/proc"; then
        mount -t proc proc "$CHROOT/proc"
        MOUNTED_PROC=1
    fi
}

# A debootstrap recent enough for the target suite: the one packaged in trixie, unpacked
# (not installed) into a scratch directory.
fetch_debootstrap() {
    mirror="$1"
    if [ -x "$WORKDIR/root/usr/sbin/debootstrap" ]; then
        return
    fi
    if ! command -v debootstrap >/dev/null 2>&1; then
        say "installing the host's debootstrap (for its helper dependencies)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
    fi
    mkdir -p "$WORKDIR/lists/partial" "$WORKDIR/cache/archives/partial"
    echo "deb $mirror trixie main" >"$WORKDIR/sources.list"
    set -- -o "Dir::Etc::SourceList=$WORKDIR/sources.list" -o Dir::Etc::SourceParts=/dev/null \
        -o "Dir::State::Lists=$WORKDIR/lists" -o "Dir::Cache=$WORKDIR/cache" -o APT::Sandbox::User=root
    apt-get "$@" update -qq
    (cd "$WORKDIR" && apt-get "$@" download debootstrap >/dev/null)
    rm -rf "$WORKDIR/root"
    dpkg-deb -x "$(ls "$WORKDIR"/debootstrap_*_all.deb | tail -n 1)" "$WORKDIR/root"
}

if chroot_ready; then
    say "chroot $CHROOT already has Ruby Sidekiq; skipping bootstrap and packages"
else
    MIRROR="$(host_mirror)"
    if [ -z "$MIRROR" ]; then
        say "could not read a Debian mirror from this host's apt configuration" >&2
        exit 1
    fi
    say "suite=$SUITE chroot=$CHROOT mirror=$MIRROR"
    if [ ! -x "$CHROOT/usr/bin/apt-get" ]; then
        fetch_debootstrap "$MIRROR"
        say "bootstrapping $SUITE (minbase) into $CHROOT"
        mkdir -p "$CHROOT"
        DEBOOTSTRAP_DIR="$WORKDIR/root/usr/share/debootstrap" \
            "$WORKDIR/root/usr/sbin/debootstrap" --variant=minbase "$SUITE" "$CHROOT" "$MIRROR" \
            >"$WORKDIR/debootstrap.log" 2>&1 || {
            say "debootstrap failed; last lines of $WORKDIR/debootstrap.log:" >&2
            tail -n 20 "$WORKDIR/debootstrap.log" >&2
            exit 1
        }
    fi
    cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
    # The host clock may be ahead of the mirror snapshot, which makes a testing Release
    # file look expired.
    echo 'Acquire::Check-Valid-Until "false";' >"$CHROOT/etc/apt/apt.conf.d/99interop-no-valid-until"
    # Refuse every service start requested by a maintainer script.
    printf '#!/bin/sh\nexit 101\n' >"$CHROOT/usr/sbin/policy-rc.d"
    chmod 755 "$CHROOT/usr/sbin/policy-rc.d"
    ensure_proc
    say "installing: $PACKAGES"
    chroot "$CHROOT" apt-get update -qq
    # shellcheck disable=SC2086
    chroot "$CHROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        -o Dpkg::Use-Pty=0 \
        $PACKAGES >/dev/null
    chroot "$CHROOT" apt-get clean
fi

say "writing the Ruby application to $CHROOT/opt/interop"
mkdir -p "$CHROOT/opt/interop"

cat >"$CHROOT/opt/interop/app.rb" <<'RUBY'
# Job classes used by the Wurk interop tests. Loaded by `sidekiq -r ./app.rb`.
require "sidekiq"
require "json"

# INTEROP_POLL shortens the scheduler's poll (and its initial wait), so tests
# see scheduled jobs and retries come due within seconds.
Sidekiq.configure_server do |config|
  poll = ENV["INTEROP_POLL"].to_s
  config[:poll_interval_average] = poll.to_f unless poll.empty?
end

module InteropRecorder
  RESULTS_KEY = "interop:results"

  def record_run(args)
    entry = {
      "jid" => jid,
      "class" => self.class.name,
      "args" => args,
      "runner" => "ruby",
      "pid" => ::Process.pid,
      "sidekiq" => Sidekiq::VERSION
    }
    Sidekiq.redis { |conn| conn.call("RPUSH", RESULTS_KEY, JSON.generate(entry)) }
  end
end

# Writes one JSON line per execution to interop:results.
class InteropEcho
  include Sidekiq::Job
  include InteropRecorder

  def perform(*args)
    record_run(args)
  end
end

# Bumps a per-jid counter (for exactly-once checks), optionally takes a little
# time, and records its run.
class InteropCount
  include Sidekiq::Job
  include InteropRecorder

  def perform(label = nil, seconds = 0)
    Sidekiq.redis { |conn| conn.call("HINCRBY", "interop:counts", jid, 1) }
    sleep seconds.to_f if seconds.to_f > 0
    record_run([label, seconds])
  end
end

class OkJob
  include Sidekiq::Job

  def perform(*_args)
  end
end

# Always raises; retried twice, then moved to the dead set.
class FailJob
  include Sidekiq::Job
  sidekiq_options retry: 2, backtrace: 10

  def perform(*args)
    raise ArgumentError, "FailJob refuses #{args.inspect}"
  end
end

# Always raises and is never retried.
class NoRetryJob
  include Sidekiq::Job
  sidekiq_options retry: false

  def perform(*_args)
    raise "NoRetryJob gives up"
  end
end

# Holds a worker thread for a while, so it shows on the Busy page.
class SlowJob
  include Sidekiq::Job

  def perform(seconds = 20)
    sleep seconds.to_f
  end
end
RUBY

cat >"$CHROOT/opt/interop/config.ru" <<'RUBY'
# Sidekiq Web UI for the interop tests: rackup -s webrick -o 127.0.0.1 -p PORT config.ru
require "securerandom"
require "rack/session"
require "sidekiq"
require "sidekiq/web"

Sidekiq.configure_client do |config|
  config.redis = {url: ENV.fetch("REDIS_URL")}
end

# The Web UI keeps its CSRF token in a cookie session.
use Rack::Session::Cookie, secret: SecureRandom.hex(32), same_site: true, max_age: 86_400
run Sidekiq::Web
RUBY

VERSION_LINE=$(chroot "$CHROOT" ruby -e 'require "sidekiq"; print "ruby #{RUBY_VERSION}, sidekiq #{Sidekiq::VERSION}"')
say "ready: $VERSION_LINE"
say "took $(($(date +%s) - START))s"
