import os, pty, sys, time, select
cmd = sys.argv[1:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp(cmd[0], cmd)
time.sleep(3)
os.write(fd, b"hello\n")
out=b""
end=time.time()+6
while time.time()<end:
    r,_,_=select.select([fd],[],[],0.5)
    if r:
        try: d=os.read(fd,4096)
        except OSError: break
        if not d: break
        out+=d
    p,st=os.waitpid(pid,os.WNOHANG)
    if p: print("exited", os.waitstatus_to_exitcode(st)); break
else:
    print("STILL RUNNING after 9s")
    os.system("ps -o pid,pgid,stat,tpgid,comm -t $(ps -o tty= -p %d)" % pid)
    os.kill(pid, 9)
print("output:", out)
