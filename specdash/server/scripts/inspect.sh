# inspect.sh pid PID | inspect.sh port PORT
# What a process is (for adopting a server specdash did not start): its state, process group and
# session, start time (epoch), owner, working directory, where stdout/stderr point, its argv (base64 of
# /proc/PID/cmdline, NUL-separated) and the members of its process group. Reads /proc only; signals nothing.
what=$1 value=$2
if [ "$what" = port ]; then
    listener=$(port_listener "$value")
    [ -n "$listener" ] || { echo "noport $value"; exit 0; }
    pid=$(printf '%s\n' "$listener" | sed -n 's/.*users:(("[^"]*",pid=\([0-9]*\),.*/\1/p')
    [ -n "$pid" ] || { echo "hidden $listener"; exit 0; }
else
    pid=$value
fi
[ -r "/proc/$pid/stat" ] || { echo "gone $pid"; exit 0; }
# "pid (comm) state ppid pgrp session ...": comm may hold spaces and parens, so cut after the last ") ".
set -- $(sed 's/.*) //' "/proc/$pid/stat")
state=$1 pgrp=$3 sid=$4 starttime=${20}
echo "pid $pid"
echo "stat $state $pgrp $sid"
echo "started $(awk -v b="$(awk '/^btime/ { print $2 }' /proc/stat)" -v s="$starttime" -v t="$(getconf CLK_TCK)" \
    'BEGIN { printf "%.2f", b + s / t }')"
echo "uid $(awk '/^Uid:/ { print $2 }' "/proc/$pid/status") $(id -u)"
echo "cwd $(readlink "/proc/$pid/cwd" 2>/dev/null)"
echo "fd1 $(readlink "/proc/$pid/fd/1" 2>/dev/null)"
echo "fd2 $(readlink "/proc/$pid/fd/2" 2>/dev/null)"
echo "argv $(base64 -w0 "/proc/$pid/cmdline" 2>/dev/null)"
group_members "$pgrp" | sed 's/^ */member /'
