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
