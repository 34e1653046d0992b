# start.sh RUN_ID PORT WORKDIR META_JSON NENV ENV... ARGV...
# Refuses a second live run and a busy port before launching; then launches detached in its own
# session and process group with all three streams redirected, and writes the run record.
run_id=$1 port=$2 workdir=$3 meta=$4 nenv=$5
shift 5
envs=("${@:1:$nenv}")
shift "$nenv"
mkdir -p "$RUNS" && chmod 700 "$SPECDASH_HOME" "$RUNS"

cur=$(current_run)
if [ -n "$cur" ] && [ -f "$RUNS/$cur/pid" ]; then
    read -r pid pgid started <"$RUNS/$cur/pid"
    if alive "$pid" || [ -n "$(group_members "$pgid")" ]; then
        echo "live $cur $pid"
        exit 10
    fi
fi
listener=$(port_listener "$port")
if [ -n "$listener" ]; then
    echo "busy $listener"
    exit 11
fi
case "$workdir" in "~") workdir=$HOME ;; "~/"*) workdir="$HOME/${workdir#\~/}" ;; esac
cd "$workdir" 2>/dev/null || { echo "workdir $workdir"; exit 12; }
command -v setsid >/dev/null 2>&1 || { echo "nosetsid"; exit 13; }

dir="$RUNS/$run_id"
mkdir -p "$dir"
printf '%s\n' "$meta" >"$dir/run.json"
: >"$dir/server.log"
# A background job of a non-interactive shell is not a group leader, so setsid makes it the leader of a
# new session without forking: $! is the server's PID and also its PGID.
env "${envs[@]}" setsid "$@" >"$dir/server.log" 2>&1 </dev/null &
pid=$!
printf '%s %s %s\n' "$pid" "$pid" "$(date +%s.%N)" >"$dir/pid"
printf '%s\n' "$run_id" >"$SPECDASH_HOME/current"
echo "started $pid $pid $dir"
