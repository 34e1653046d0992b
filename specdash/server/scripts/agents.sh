# agents.sh URL IDLE_SECONDS GRACE_SECONDS
# Stop the probe agents (specdash.bench.agent, started detached by server/probe_agent.HostRunner) that load
# URL: all of them with IDLE_SECONDS = -1 (`down`: the server goes away), else only those whose client has
# not pinged for longer than IDLE_SECONDS (orphans of a specdash that was killed, before a new sweep).
# An agent is found by its pidfile (~/.specdash/procs/<client>/d.<pid>, remote/tagging.wrap_detached) and
# signalled only while /proc/<pid>/environ still carries that client's tag, so a recycled PID is never
# touched; its command line names its run directory (--job DIR/job.json, whose DIR/url is the URL it loads)
# and its alive file (--alive: the client's last ping). SIGTERM (in-flight requests finish, `done` is
# recorded), SIGKILL after GRACE_SECONDS. One tagged line per agent stopped: `stopped PID RUN_DIR`.
url=$1 idle=$2 grace=$3
case "$idle" in -1) ;; '' | *[!0-9]*) say "badidle $idle"; exit 21 ;; esac
case "$grace" in '' | *[!0-9]*) say "badgrace $grace"; exit 21 ;; esac
cd || exit 0
procs=.specdash/procs
[ -d "$procs" ] || { say "done"; exit 0; }

# The word after $2 on process $1's command line.
arg_after() {
    tr '\0' '\n' <"/proc/$1/cmdline" 2>/dev/null | awk -v k="$2" 'f { print; exit } $0 == k { f = 1 }'
}

victims=""
now=$(date +%s)
for f in "$procs"/*/d.*; do
    [ -e "$f" ] || continue
    pid=${f##*/d.}
    client=${f%/d.*}
    client=${client##*/}
    case "$pid" in '' | *[!0-9]*) continue ;; esac
    if ! grep -qz "^SPECDASH_TAG=$client\.d\$" "/proc/$pid/environ" 2>/dev/null || ! alive "$pid"; then
        rm -f "$f" # gone (or the PID is someone else's now): nothing of ours to stop
        continue
    fi
    job=$(arg_after "$pid" --job)
    dir=${job%/job.json}
    [ -n "$job" ] && [ -f "$dir/url" ] && [ "$(cat "$dir/url")" = "$url" ] || continue
    if [ "$idle" != -1 ]; then
        pinged=$(stat -c %Y "$(arg_after "$pid" --alive)" 2>/dev/null || echo 0)
        [ $((now - pinged)) -gt "$idle" ] || continue # its client is still there
    fi
    kill -TERM "$pid" 2>/dev/null && victims="$victims $pid" && say "stopped $pid $dir"
done
deadline=$(($(date +%s) + grace))
while [ -n "$victims" ] && [ "$(date +%s)" -lt "$deadline" ]; do
    left=""
    for p in $victims; do alive "$p" && left="$left $p"; done
    victims=$left
    [ -n "$victims" ] && sleep 0.1
done
for p in $victims; do kill -KILL "$p" 2>/dev/null && say "killed $p"; done
say "done"
