# wait_exit.sh PID: ends by itself when PID is gone (or a zombie); prints "exited". Checked 5 times a second,
# so a crash is seen within about 0.2 s of the process dying.
while alive "$1"; do sleep 0.2; done
echo "exited $(date +%s.%N)"
