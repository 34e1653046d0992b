# adopt.sh RUN_ID PID PGID STARTED META_JSON LOG
# Writes a run record for a server specdash did not start, so every specdash (attach, down, bench) treats
# it as the current run: refuses a live run of ours, and a PID that is gone or is no longer the process
# that was inspected (its start time changed: the PID was reused). The log is linked, never copied.
run_id=$1 pid=$2 pgid=$3 started=$4 meta=$5 log=$6
mkdir -p "$RUNS" && chmod 700 "$SPECDASH_HOME" "$RUNS"
cur=$(current_run)
if [ -n "$cur" ] && [ -f "$RUNS/$cur/pid" ]; then
    read -r cpid cpgid cstarted <"$RUNS/$cur/pid"
    if alive "$cpid" || [ -n "$(group_members "$cpgid")" ]; then
        echo "live $cur $cpid"
        exit 10
    fi
fi
alive "$pid" || { echo "gone $pid"; exit 14; }
set -- $(sed 's/.*) //' "/proc/$pid/stat")
now=$(awk -v b="$(awk '/^btime/ { print $2 }' /proc/stat)" -v s="${20}" -v t="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", b + s / t }')
[ "$now" = "$started" ] || { echo "reused $pid"; exit 14; }
case "$log" in "~/"*) log="$HOME/${log#\~/}" ;; esac
[ -z "$log" ] || [ -f "$log" ] || { echo "nolog $log"; exit 15; }
dir="$RUNS/$run_id"
mkdir -p "$dir"
printf '%s\n' "$meta" >"$dir/run.json"
if [ -n "$log" ]; then ln -s "$log" "$dir/server.log"; else : >"$dir/server.log"; fi
printf '%s %s %s\n' "$pid" "$pgid" "$started" >"$dir/pid"
printf '%s\n' "$run_id" >"$SPECDASH_HOME/current"
echo "adopted $pid $pgid $dir"
