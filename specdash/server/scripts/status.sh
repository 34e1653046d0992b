# status.sh [RUN_ID]: the run record of RUN_ID (default: the current run) as key lines.
run_id=${1:-$(current_run)}
[ -n "$run_id" ] || { echo "none"; exit 0; }
dir="$RUNS/$run_id"
[ -f "$dir/pid" ] || { echo "none"; exit 0; }
read -r pid pgid started <"$dir/pid"
echo "id $run_id"
echo "pid $pid $pgid $started"
echo "log $dir/server.log $(wc -c <"$dir/server.log" 2>/dev/null || echo 0)"
if alive "$pid"; then echo "alive main"; elif [ -n "$(group_members "$pgid")" ]; then echo "alive orphans"; else echo "dead"; fi
[ -f "$dir/stopped" ] && echo "stopped $(cat "$dir/stopped")"
echo "meta $(cat "$dir/run.json")"
