# resident.sh asleep RUN_ID JSON | awake RUN_ID | list
# The sleeping servers of resident modes: a run whose directory holds `asleep` (JSON: what it held awake
# and asleep, its accept length before the sleep) is asleep and not the current run; `awake` makes it
# current again. `list` reports each sleeping run that is still alive.
check_owned "$SPECDASH_HOME" "$RUNS" "$SPECDASH_HOME/current"
action=$1
case "$action" in
asleep)
    run_id=$2 dir="$RUNS/$2"
    [ -f "$dir/pid" ] || { say "norun $run_id"; exit 20; }
    check_owned "$dir"
    if ! { printf '%s\n' "$3" >"$dir/asleep.new" && mv -f "$dir/asleep.new" "$dir/asleep"; } 2>/dev/null; then
        say "statedir $dir"
        exit 14
    fi
    [ "$(current_run)" = "$run_id" ] && rm -f "$SPECDASH_HOME/current"
    say "asleep $run_id"
    ;;
awake)
    run_id=$2 dir="$RUNS/$2"
    [ -f "$dir/pid" ] || { say "norun $run_id"; exit 20; }
    check_owned "$dir"
    rm -f "$dir/asleep"
    if ! { printf '%s\n' "$run_id" >"$SPECDASH_HOME/current.new" &&
        mv -f "$SPECDASH_HOME/current.new" "$SPECDASH_HOME/current"; } 2>/dev/null; then
        say "statedir $SPECDASH_HOME"
        exit 14
    fi
    say "awake $run_id"
    ;;
list)
    for marker in "$RUNS"/*/asleep; do
        [ -f "$marker" ] || continue
        dir=${marker%/asleep}
        run_id=${dir##*/}
        check_owned "$dir" "$dir/pid" "$marker"
        read_record "$dir/pid" || continue
        if same_process || [ -n "$(run_members "$run_id")" ]; then
            say "run $run_id $(head -c 65536 "$dir/run.json" 2>/dev/null | head -n 1)"
            say "asleep $run_id $(head -c 65536 "$marker" 2>/dev/null | head -n 1)"
        else
            rm -f "$marker" # it died asleep: nothing to wake
        fi
    done
    say "end"
    ;;
*)
    say "badaction $action"
    exit 21
    ;;
esac
