# status.sh [RUN_ID]: the run record of RUN_ID (default: the current run) as tagged key lines.
check_owned "$SPECDASH_HOME" "$RUNS" "$SPECDASH_HOME/current"
run_id=${1:-$(current_run)}
if [ -z "${1:-}" ] && [ -f "$SPECDASH_HOME/current" ]; then
    # An empty or garbled `current` (a full disk, a crash mid-write) is a damaged record, not "no run":
    # the server it named may be running.
    case "$run_id" in '' | *[!A-Za-z0-9_.-]* | .*) say "badcurrent $SPECDASH_HOME/current"; exit 0 ;; esac
fi
[ -n "$run_id" ] || { say "none"; exit 0; }
dir="$RUNS/$run_id"
[ -f "$dir/pid" ] || { say "none"; exit 0; }
check_owned "$dir" "$dir/pid" "$dir/run.json"
say "id $run_id"
if ! read_record "$dir/pid"; then
    say "badrecord $dir/pid"
    say "meta $(head -c 65536 "$dir/run.json" 2>/dev/null | head -n 1)"
    exit 0
fi
say "pid $pid $pgid $started"
say "log $(wc -c <"$dir/server.log" 2>/dev/null || echo 0) $dir/server.log"
if same_process; then
    say "alive main"
elif [ -n "$(run_members "$run_id")" ]; then
    say "alive orphans"
else
    say "dead"
fi
[ -f "$dir/stopped" ] && say "stopped $(head -c 100 "$dir/stopped")"
say "meta $(head -c 65536 "$dir/run.json" 2>/dev/null | head -n 1)"
