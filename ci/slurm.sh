#!/usr/bin/env bash
# A real single-node Slurm cluster for arena's tests and benchmarks (Debian's slurmctld, slurmd,
# munge; installed by ci/setup-tests.sh), with N fake GPUs declared as gres: device nodes under DIR
# with /dev/null's numbers, so Slurm hands out gpu indices and sets SLURM_JOB_GPUS and
# CUDA_VISIBLE_DEVICES as on a GPU node. Everything lives under DIR. Needs root.
#   ci/slurm.sh start DIR [N]   prints the slurm.conf path once the node is idle
#   ci/slurm.sh stop DIR        stops slurmd and slurmctld by PID (munged is left for others)
# Adapted from the workplace recipe ../shared/slurm/single-node.sh.
set -euo pipefail
cmd=${1:?usage: ci/slurm.sh start|stop DIR [NGPUS]}
D=${2:?usage: ci/slurm.sh start|stop DIR [NGPUS]}
N=${3:-3}
mkdir -p "$D"
D=$(cd "$D" && pwd)
case "$cmd" in
stop)
  for p in slurmd slurmctld; do
    [ -f "$D/run/$p.pid" ] && kill "$(cat "$D/run/$p.pid")" 2>/dev/null || true
  done
  for p in slurmd slurmctld; do
    for _ in $(seq 1 50); do
      [ -f "$D/run/$p.pid" ] && kill -0 "$(cat "$D/run/$p.pid")" 2>/dev/null || break
      sleep 0.1
    done
  done
  exit 0 ;;
start) ;;
*) echo "usage: ci/slurm.sh start|stop DIR [NGPUS]" >&2; exit 2 ;;
esac
command -v slurmctld >/dev/null || { echo "ci/slurm.sh: slurmctld not found (bash ci/setup-tests.sh installs it)" >&2; exit 1; }
mkdir -p "$D"/{spool,state,log,run}
for i in $(seq 0 $((N-1))); do [ -e "$D/gpu$i" ] || mknod -m 666 "$D/gpu$i" c 1 3; done
if [ ! -f /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
fi
mkdir -p /run/munge; chown munge:munge /run/munge
munge -n >/dev/null 2>&1 || su -s /bin/sh munge -c /usr/sbin/munged
for _ in $(seq 1 50); do munge -n >/dev/null 2>&1 && break; sleep 0.1; done
H=$(hostname -s)
# A port pair per DIR, so that two clusters of two checkouts do not collide.
port=$(( 20000 + $(printf '%s' "$D" | cksum | cut -d' ' -f1) % 20000 ))
cat > "$D/slurm.conf" <<EOT
ClusterName=arena
SlurmctldHost=$H
SlurmUser=root
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
ReturnToService=2
KillWait=5
# Slurm delays the scheduling of batch jobs by up to 3 s by default (a high-throughput
# setting); a test cluster starts the next job as soon as a GPU frees, as a lab's GPU
# partition usually does. ci/bench/slurm-overhead.sh reports the default too.
$( p=${ARENA_SLURM_SCHED_PARAMS-batch_sched_delay=0}; [ -n "$p" ] && echo "SchedulerParameters=$p" )
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
NodeName=$H CPUs=$(nproc) RealMemory=16000 Gres=gpu:$N State=UNKNOWN
PartitionName=gpu Nodes=$H Default=YES MaxTime=INFINITE State=UP
EOT
echo "NodeName=$H Name=gpu File=$D/gpu[0-$((N-1))]" > "$D/gres.conf"
/usr/sbin/slurmctld -f "$D/slurm.conf"
/usr/sbin/slurmd -f "$D/slurm.conf"
export SLURM_CONF="$D/slurm.conf"
for _ in $(seq 1 100); do sinfo -h -o %T 2>/dev/null | grep -q idle && break; sleep 0.2; done
sinfo -h -o %T | grep -q idle || { echo "ci/slurm.sh: the node did not come up; see $D/log" >&2; exit 1; }
echo "$D/slurm.conf"
