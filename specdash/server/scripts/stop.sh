# stop.sh RUN_ID GRACE_SECONDS PORT
# SIGTERM to the process group, wait up to GRACE_SECONDS, then SIGKILL the group; verify that no member
# is left and the port is free. Reports every step on stdout, one fact per line.
run_id=$1 grace=$2 port=$3
dir="$RUNS/$run_id"
[ -f "$dir/pid" ] || { echo "norun $run_id"; exit 20; }
read -r pid pgid started <"$dir/pid"
members=$(group_members "$pgid")
if [ -z "$members" ]; then
    echo "notrunning $pid"
else
    printf '%s\n' "$members" | sed 's/^ */member /'
    kill -TERM -- "-$pgid" 2>/dev/null
    echo "term $pgid"
    deadline=$(($(date +%s) + ${grace%.*}))
    while [ -n "$(group_members "$pgid")" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
    left=$(group_members "$pgid")
    if [ -n "$left" ]; then
        printf '%s\n' "$left" | sed 's/^ */killed /'
        kill -KILL -- "-$pgid" 2>/dev/null
        deadline=$(($(date +%s) + 10))
        while [ -n "$(group_members "$pgid")" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
    fi
fi
left=$(group_members "$pgid")
[ -n "$left" ] && printf '%s\n' "$left" | sed 's/^ */survivor /'
# The port can lag behind the processes for a moment.
deadline=$(($(date +%s) + 5))
while [ -n "$(port_listener "$port")" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
listener=$(port_listener "$port")
if [ -n "$listener" ]; then echo "portbusy $listener"; else echo "portfree $port"; fi
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits 2>/dev/null | sed 's/^/gpumem /'
fi
date +%s.%N >"$dir/stopped"
[ "$(current_run)" = "$run_id" ] && rm -f "$SPECDASH_HOME/current"
echo "done"
