# stop.sh RUN_ID GRACE_SECONDS PORT
# SIGTERM to the process group, wait up to GRACE_SECONDS (a whole number), then SIGKILL the group;
# verify that no member is left and the port is free. Reports every step, one tagged fact per line.
# Only the process start.sh launched (same kernel start time and group) or members carrying the run's
# tag are signalled; never a group id of 1 or less.
run_id=$1 grace=$2 port=$3
case "$grace" in '' | *[!0-9]*) say "badgrace $grace"; exit 21 ;; esac
check_owned "$SPECDASH_HOME" "$RUNS" "$SPECDASH_HOME/current"
dir="$RUNS/$run_id"
[ -f "$dir/pid" ] || { say "norun $run_id"; exit 20; }
check_owned "$dir" "$dir/pid"
if ! read_record "$dir/pid"; then
    # Empty or half-written (a full disk at launch): nothing can be verified, so nothing is signalled;
    # the run is closed so that a new launch is not refused because of it.
    say "badrecord $dir/pid"
    date +%s.%N >"$dir/stopped" 2>/dev/null
    [ "$(current_run)" = "$run_id" ] && rm -f "$SPECDASH_HOME/current"
    say "done"
    exit 0
fi
# signal SIG: the whole group when its leader is verified, else each tagged member by PID.
signal() {
    if same_process; then
        kill "-$1" -- "-$pgid" 2>/dev/null
    else
        run_members "$run_id" | while read -r mpid _; do kill "-$1" "$mpid" 2>/dev/null; done
    fi
}
left() {
    if same_process; then group_members "$pgid"; else run_members "$run_id"; fi
}
members=$(left)
if [ -z "$members" ]; then
    say "notrunning $pid"
else
    while read -r line; do say "member $line"; done <<<"$members"
    signal TERM
    say "term $pgid"
    deadline=$(($(date +%s) + grace))
    while [ -n "$(left)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
    rest=$(left)
    if [ -n "$rest" ]; then
        while read -r line; do say "killed $line"; done <<<"$rest"
        signal KILL
        deadline=$(($(date +%s) + 10))
        while [ -n "$(left)" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
    fi
fi
rest=$(left)
[ -n "$rest" ] && while read -r line; do say "survivor $line"; done <<<"$rest"
# The port can lag behind the processes for a moment.
deadline=$(($(date +%s) + 5))
while [ -n "$(port_listener "$port")" ] && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
listener=$(port_listener "$port")
if [ -n "$listener" ]; then say "portbusy $listener"; else say "portfree $port"; fi
if command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader,nounits 2>/dev/null | while read -r g; do say "gpumem $g"; done
fi
if [ -n "$rest" ]; then
    say "done"
    exit 23 # something survived SIGKILL: the run is not marked stopped, `current` stays
fi
date +%s.%N >"$dir/stopped"
[ "$(current_run)" = "$run_id" ] && rm -f "$SPECDASH_HOME/current"
say "done"
