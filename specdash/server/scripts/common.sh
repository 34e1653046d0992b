# Shared by every remote script specdash runs (prepended by specdash/server/remote.py).
# Plain POSIX tools only: ps, kill, awk; `ss` when present.
set -u
umask 077
# The host's `state_dir` (config), passed in the environment; `~/` means the remote user's home.
case "${SPECDASH_HOME:-}" in
"") SPECDASH_HOME="$HOME/.specdash" ;;
"~") SPECDASH_HOME=$HOME ;;
"~/"*) SPECDASH_HOME="$HOME/${SPECDASH_HOME#\~/}" ;;
esac
RUNS="$SPECDASH_HOME/runs"

# A process is alive unless it is gone or a zombie (our containers' PID 1 reaps slowly).
alive() {
    st=$(ps -o stat= -p "$1" 2>/dev/null)
    case "$st" in '' | Z*) return 1 ;; *) return 0 ;; esac
}

# Live (non-zombie) members of process group $1: "pid args" per line.
group_members() {
    ps -eo pid=,pgid=,stat=,args= 2>/dev/null | awk -v g="$1" '$2 == g && $3 !~ /^Z/ { $2 = ""; $3 = ""; print }'
}

# The listener on TCP port $1, if any: one line from ss (with the process when visible), or a /proc line.
port_listener() {
    if command -v ss >/dev/null 2>&1; then
        ss -Hltnp "sport = :$1" 2>/dev/null | head -n 1
        return
    fi
    hex=$(printf ':%04X' "$1")
    awk -v p="$hex" '$4 == "0A" && substr($2, length($2) - 4) == p { print "LISTEN inode " $10; exit }' \
        /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

# Print the current run id (empty if none).
current_run() {
    [ -f "$SPECDASH_HOME/current" ] && cat "$SPECDASH_HOME/current"
}

# Every reply line starts with $SPECDASH_TAG, a nonce chosen per call, so that a login banner (~/.bashrc)
# or an odd file name cannot pass for one; a backslash or a newline inside a value is sent as \\ or \n.
say() {
    local line="$*"
    line=${line//\\/\\\\}
    line=${line//$'\n'/\\n}
    printf '%s %s\n' "${SPECDASH_TAG:-}" "$line"
}

# Refuse (exit 30) a state path that another user owns or could have written: a pid file we did not
# write must never choose what `down` signals.
# Whether directory $1 is owned by us or by root (a link's target directory: nobody else may rename in it).
owned_by_us_or_root() {
    local owner
    owner=$(stat -c %u -- "$1" 2>/dev/null) || return 1
    [ "$owner" = "$(id -u)" ] || [ "$owner" = 0 ]
}

# A symlink (a cluster's home or scratch often is one) is followed when the link itself is ours and its final
# target passes the same checks (owned by us, not writable by others); a link that leads elsewhere is refused.
check_owned() {
    local p perm target
    for p in "$@"; do
        [ -e "$p" ] || [ -L "$p" ] || continue
        if [ -L "$p" ]; then
            target=$(readlink -f -- "$p" 2>/dev/null)
            if [ "$(stat -c %u -- "$p" 2>/dev/null)" != "$(id -u)" ] || [ -z "$target" ] || [ ! -e "$target" ]; then
                say "unsafe $p is a symlink that is not ours or leads nowhere"
                exit 30
            fi
            if [ ! -O "$target" ] || ! owned_by_us_or_root "$(dirname -- "$target")"; then
                say "unsafe $p is a symlink to $target, which (or whose directory) is not owned by $(id -un)"
                exit 30
            fi
            p=$target
        elif [ ! -O "$p" ]; then
            say "unsafe $p is not owned by $(id -un)"
            exit 30
        fi
        perm=$(stat -c %a "$p" 2>/dev/null) || continue
        case "$perm" in
        *[2367]? | *[2367])
            say "unsafe $p is writable by group or others (mode $perm)"
            exit 30
            ;;
        esac
    done
}

# The kernel's start time of process $1 (clock ticks since boot, /proc/PID/stat field 22) and its
# process group (field 5): "START PGID", empty when gone. The comm field may hold spaces: cut after ')'.
proc_identity() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    set -- $stat
    printf '%s %s\n' "${20}" "${3}"
}

# read_record FILE: sets pid pgid started pstart from a pid file; fails for an empty, half-written or
# garbled record (a full disk at launch), which is then reported, never signalled.
read_record() {
    pid='' pgid='' started='' pstart=''
    [ -s "$1" ] || return 1
    read -r pid pgid started pstart <"$1" 2>/dev/null
    case "$pid:$pgid:$pstart" in
    *[!0-9:]* | :* | *::*) return 1 ;;
    esac
    [ -n "$pstart" ] && [ "$pgid" -gt 1 ] && [ "$pid" -gt 1 ]
}

# Whether $pid is still the process start.sh launched (same kernel start time, same group).
same_process() {
    [ "$(proc_identity "$pid")" = "$pstart $pgid" ] && alive "$pid"
}

# Members of group $pgid that carry this run's tag in their environment, or whose stdout or stderr is this
# run's own log ("pid args" per line): only these are ours when the main process is gone (its PID or group
# id may have been reused). The log is needed as well as the tag: a process that sets its title
# (setproctitle, e.g. vLLM's VLLM::EngineCore and VLLM::Worker) overwrites the memory /proc/PID/environ
# shows, so its tag reads as gone, while its stdout still points at the file start.sh opened for the run.
run_members() {
    local line mpid log
    log=$(readlink -f "$RUNS/$1/server.log" 2>/dev/null)
    group_members "$pgid" | while read -r line; do
        mpid=${line%% *}
        if tr '\0' '\n' <"/proc/$mpid/environ" 2>/dev/null | grep -qxF "SPECDASH_RUN=$1"; then
            printf '%s\n' "$line"
        elif [ -n "$log" ] && { [ "$(readlink "/proc/$mpid/fd/1" 2>/dev/null)" = "$log" ] ||
            [ "$(readlink "/proc/$mpid/fd/2" 2>/dev/null)" = "$log" ]; }; then
            printf '%s\n' "$line"
        fi
    done
}
