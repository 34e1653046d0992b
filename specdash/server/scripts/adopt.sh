# adopt.sh RUN_ID PID PGID STARTED META_JSON LOG
# Writes a run record for a server specdash did not start, so every specdash (attach, down, bench) treats
# it as the current run: refuses a live run of ours, and a PID that is gone or is no longer the process
# that was inspected (its start time changed: the PID was reused). The log is linked, never copied.
run_id=$1 pid=$2 pgid=$3 started=$4 meta=$5 log=$6
mkdir -p "$RUNS" && chmod 700 "$SPECDASH_HOME" "$RUNS"
cur=$(current_run)
if [ -n "$cur" ] && [ -f "$RUNS/$cur/pid" ]; then
    if read_record "$RUNS/$cur/pid" && { alive "$pid" || [ -n "$(group_members "$pgid")" ]; }; then
        say "live $cur $pid"
        exit 10
    fi
fi
run_id=$1 pid=$2 pgid=$3 started=$4 meta=$5 log=$6
alive "$pid" || { say "gone $pid"; exit 14; }
set -- $(sed 's/.*) //' "/proc/$pid/stat")
ticks=${20}
now=$(awk -v b="$(awk '/^btime/ { print $2 }' /proc/stat)" -v s="${20}" -v t="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", b + s / t }')
[ "$now" = "$started" ] || { say "reused $pid"; exit 14; }
case "$log" in "~/"*) log="$HOME/${log#\~/}" ;; esac
[ -z "$log" ] || [ -f "$log" ] || { say "nolog $log"; exit 15; }
dir="$RUNS/$run_id"
mkdir -m 700 -p "$dir"
printf '%s\n' "$meta" >"$dir/run.json"
if [ -n "$log" ]; then ln -s "$log" "$dir/server.log"; else : >"$dir/server.log"; fi
# The record start.sh writes: PID, group, start (epoch) and the kernel's start time (down checks it).
printf '%s %s %s %s\n' "$pid" "$pgid" "$started" "$ticks" >"$dir/pid.tmp" && mv "$dir/pid.tmp" "$dir/pid"
printf '%s\n' "$run_id" >"$SPECDASH_HOME/current.new" && mv -f "$SPECDASH_HOME/current.new" "$SPECDASH_HOME/current"
say "adopted $pid $pgid $dir"
