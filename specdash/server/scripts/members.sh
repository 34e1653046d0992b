# members.sh RUN_ID: the live members of the run's process group, one "member PID ARGS" line each
# (what a crash left behind: a worker holding GPU memory, an API server whose engine died).
run_id=$1
dir="$RUNS/$run_id"
[ -f "$dir/pid" ] || { say "norun $run_id"; exit 0; }
read_record "$dir/pid" || { say "damaged $dir/pid"; exit 0; }
group_members "$pgid" | while read -r line; do say "member $line"; done
