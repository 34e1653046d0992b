# members.sh RUN_ID: the live members of the run's process group, one "member PID ARGS" line each
# (what a crash left behind: a worker holding GPU memory, an API server whose engine died).
run_id=$1
dir="$RUNS/$run_id"
[ -f "$dir/pid" ] || { echo "norun $run_id"; exit 0; }
read -r pid pgid started <"$dir/pid"
group_members "$pgid" | sed 's/^ */member /'
