#!/usr/bin/env bash
# Prepare a one-node SLURM cluster on this machine for tests/workflow/test_slurm.py (called by .ci/run).
# Installs Debian's slurmctld, slurmd, slurm-client and munge when missing and writes
# /etc/slurm/slurm.conf for this host. It starts no daemon: the test starts munged, slurmctld and
# slurmd itself and stops them by PID. Exit status 0 only when everything is in place; .ci/run
# tolerates a failure, and the test then skips loudly.
set -euo pipefail

need=()
for exe in munged slurmctld slurmd squeue sbatch srun; do
    command -v "$exe" >/dev/null 2>&1 || need+=("$exe")
done
if ((${#need[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "slurm-setup: missing ${need[*]} and not root: cannot apt-get install" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends slurmctld slurmd slurm-client munge
fi

if [[ -f /etc/slurm/slurm.conf ]] && ! grep -q "Written by calbench" /etc/slurm/slurm.conf; then
    echo "slurm-setup: keeping the existing /etc/slurm/slurm.conf (not written by calbench)"
    exit 0
fi
host=$(hostname -s)
cpus=$(nproc)
# RealMemory a little under the machine's memory (MiB), so that slurmd does not drain the node.
mem_mb=$(awk '/MemTotal/ {printf "%d", $2 / 1024 * 0.85}' /proc/meminfo)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge
[[ -s /etc/munge/munge.key ]] || { command -v mungekey >/dev/null && mungekey --create --force; } \
    || dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key

# MessageTimeout=3: the controller runs only during tests/workflow/test_slurm.py, but Snakemake's SLURM executor plugin
# asks for the controller's config (10 s timeout) each time Snakemake starts while this file exists; with the
# default MessageTimeout of 10 s every other workflow test and every local run waited 9 s for it.
cat > /etc/slurm/slurm.conf <<CONF
# Written by calbench .ci/slurm-setup.sh: a one-node test cluster (root runs jobs, no accounting).
ClusterName=calbench
SlurmctldHost=${host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=600
SlurmctldTimeout=30
SlurmdTimeout=30
# Clients give up on an unreachable controller after about 2 s instead of 9 s (see the note above).
MessageTimeout=3
NodeName=${host} CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=debug Nodes=${host} Default=YES MaxTime=INFINITE State=UP
CONF
echo "slurm-setup: /etc/slurm/slurm.conf written for node ${host} (CPUs=${cpus}, RealMemory=${mem_mb})"
