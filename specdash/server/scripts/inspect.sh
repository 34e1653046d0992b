# inspect.sh pid PID | inspect.sh port PORT
# What a process is (for adopting a server specdash did not start): its state, process group and
# session, start time (epoch), owner, working directory, where stdout/stderr point, its argv (base64 of
# /proc/PID/cmdline, NUL-separated) and the members of its process group. Reads /proc only; signals nothing.
what=$1 value=$2
if [ "$what" = port ]; then
    listener=$(port_listener "$value")
    [ -n "$listener" ] || { say "noport $value"; exit 0; }
    pid=$(printf '%s\n' "$listener" | sed -n 's/.*users:(("[^"]*",pid=\([0-9]*\),.*/\1/p')
    [ -n "$pid" ] || { say "hidden $listener"; exit 0; }
else
    pid=$value
fi
[ -r "/proc/$pid/stat" ] || { say "gone $pid"; exit 0; }
# "pid (comm) state ppid pgrp session ...": comm may hold spaces and parens, so cut after the last ") ".
set -- $(sed 's/.*) //' "/proc/$pid/stat")
state=$1 pgrp=$3 sid=$4 starttime=${20}
say "pid $pid"
say "stat $state $pgrp $sid"
say "started $(awk -v b="$(awk '/^btime/ { print $2 }' /proc/stat)" -v s="$starttime" -v t="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", b + s / t }')"
say "uid $(awk '/^Uid:/ { print $2 }' "/proc/$pid/status") $(id -u)"
say "cwd $(readlink "/proc/$pid/cwd" 2>/dev/null)"
say "fd1 $(readlink "/proc/$pid/fd/1" 2>/dev/null)"
say "fd2 $(readlink "/proc/$pid/fd/2" 2>/dev/null)"
say "argv $(base64 -w0 "/proc/$pid/cmdline" 2>/dev/null)"
group_members "$pgrp" | while read -r line; do say "member $line"; done
