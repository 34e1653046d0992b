# Sourced by the install scripts: `step NAME CMD...` runs CMD quietly into $STEP_DIR/NAME.log and prints
# "$STEP_LABEL: NAME"; when CMD fails it prints the log and exits 1. Set STEP_DIR and STEP_LABEL first.
step() {
    local name=$1 log
    shift
    log=$STEP_DIR/$name.log
    echo "$STEP_LABEL: $name"
    if ! "$@" >"$log" 2>&1; then
        cat "$log" >&2
        echo "$STEP_LABEL: step '$name' failed (log: $log)" >&2
        exit 1
    fi
}
