# start.sh RUN_ID PORT WORKDIR META_JSON NENV ENV... ARGV...
# Refuses a second live run and a busy port before launching; then launches detached in its own
# session and process group with all three streams redirected, and writes the run record.
run_id=$1 port=$2 workdir=$3 meta=$4 nenv=$5
shift 5
envs=("${@:1:$nenv}")
shift "$nenv"
if ! { mkdir -p "$RUNS" && chmod 700 "$SPECDASH_HOME" "$RUNS"; } 2>/dev/null; then
    say "statedir $SPECDASH_HOME"
    exit 14
fi
check_owned "$SPECDASH_HOME" "$RUNS" "$SPECDASH_HOME/current"

cur=$(current_run)
if [ -n "$cur" ] && [ -f "$RUNS/$cur/pid" ]; then
    check_owned "$RUNS/$cur" "$RUNS/$cur/pid"
    if read_record "$RUNS/$cur/pid" && { same_process || [ -n "$(run_members "$cur")" ]; }; then
        say "live $cur $pid"
        exit 10
    fi
fi
listener=$(port_listener "$port")
if [ -n "$listener" ]; then
    say "busy $listener"
    exit 11
fi
case "$workdir" in "~") workdir=$HOME ;; "~/"*) workdir="$HOME/${workdir#\~/}" ;; esac
cd "$workdir" 2>/dev/null || { say "workdir $workdir"; exit 12; }
command -v setsid >/dev/null 2>&1 || { say "nosetsid"; exit 13; }

dir="$RUNS/$run_id"
# Every write of the record is checked: a full disk or a read-only state dir fails here, by name,
# before anything is launched.
if ! { mkdir -p "$dir" && printf '%s\n' "$meta" >"$dir/run.json" && : >"$dir/server.log"; } 2>/dev/null; then
    rm -rf "$dir"
    say "statedir $dir"
    exit 14
fi
# A background job of a non-interactive shell is not a group leader, so setsid makes it the leader of a
# new session without forking: $! is the server's PID and also its PGID. SPECDASH_RUN tags every process
# of the run, so a stop can tell them from whatever reuses the PID or group id later. The log is opened for
# appending: a truncation in place (`: > server.log`) then leaves no hole of NULs the size of what it held.
env SPECDASH_RUN="$run_id" "${envs[@]}" setsid "$@" >>"$dir/server.log" 2>&1 </dev/null &
pid=$!
ident=$(proc_identity "$pid") || ident=0 # already gone (exited at once): a record that matches nothing
if ! printf '%s %s %s %s\n' "$pid" "$pid" "$(date +%s.%N)" "${ident%% *}" >"$dir/pid.new" 2>/dev/null ||
    ! mv -f "$dir/pid.new" "$dir/pid" 2>/dev/null ||
    ! printf '%s\n' "$run_id" >"$SPECDASH_HOME/current.new" 2>/dev/null ||
    ! mv -f "$SPECDASH_HOME/current.new" "$SPECDASH_HOME/current" 2>/dev/null; then
    # The record could not be written: a server nobody can find or stop must not keep running.
    kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
    rm -f "$dir/pid.new" "$SPECDASH_HOME/current.new"
    say "statedir $dir"
    exit 14
fi
say "started $pid $pid $dir"
