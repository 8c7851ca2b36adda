#!/bin/sh
# The grader account's cgroups on one machine (deploy/README.md, "One machine"; autograder/sandbox/cgroup.py).
#
# `autograder grade` caps each submission's total memory, processes and CPU with a cgroup of its own, made under
# $AUTOGRADER_CGROUP_PARENT. The grader account is not root: this script (run as root) hands it a subtree where it
# may make those groups itself. install.sh installs it as /opt/hub/bin/<course>-cgroups.
#
#   cgroups.sh setup NAME USER     cgroup v1: the group NAME in the memory, pids, cpu and cpuacct hierarchies, owned
#                                  by USER and its group. v1 groups live in memory only: the unit <course>-cgroups
#                                  runs this at every boot. cgroup v2: nothing to do here (see `hub`).
#   cgroups.sh hub NAME USER PID   run by the hub's start script as root (PID: the start script, which becomes the
#                                  hub); prints the settings the hub passes on, as lines VARIABLE=value:
#                                  v1: `setup`, then AUTOGRADER_CGROUP_PARENT=/NAME.
#                                  v2, when the hub runs in its systemd unit (<course>-hub.service: Delegate=yes, which
#                                  sets HUB_CGROUP_DELEGATED=1): the unit's group G is the hub's to manage. PID moves
#                                  into G/hub (v2 lets a group that hands controllers to its children hold no process
#                                  itself); memory, pids and cpu are enabled below G and below G/grading, which is
#                                  delegated to USER (the folder and its cgroup.procs, cgroup.subtree_control and
#                                  cgroup.threads, as the kernel's cgroup-v2 "Delegation" says), with the leaf
#                                  G/grading/service where the course service runs. Prints AUTOGRADER_CGROUP_PARENT
#                                  (G/grading), COURSE_SERVICE_CGROUP (G/grading/service) and
#                                  COURSE_SERVICE_CGROUP_EXEC (this script): v2 moves a process only within the
#                                  subtree delegated to its account, so the course service has to START inside
#                                  it, and jupyterhub_config.py then starts it through `exec`.
#                                  Anything else (v2 without the unit): a warning, and nothing printed.
#   cgroups.sh exec CGROUP USER -- COMMAND...
#                                  (as root) moves itself into CGROUP (a cgroup v2 path), becomes USER (its groups,
#                                  HOME, USER, LOGNAME, SHELL; the rest of the environment is kept) and runs COMMAND.
#
# CGROUP_ROOT (/sys/fs/cgroup) and PROC_ROOT (/proc) name the file systems it works on (tests use fake ones).
set -eu

ROOT="${CGROUP_ROOT:-/sys/fs/cgroup}"
PROC="${PROC_ROOT:-/proc}"
SELF="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
V1_CONTROLLERS="memory pids cpu cpuacct"  # memory and pids are needed; cpu caps the CPU, cpuacct counts it
V2_CONTROLLERS="memory pids cpu"

warn() { printf 'cgroups.sh: %s\n' "$*" >&2; }
die() { warn "$*"; exit 1; }
is_v2() { [ -f "$ROOT/cgroup.controllers" ]; }

setup() {  # setup NAME USER
  name="$1" user="$2"
  is_v2 && return 0
  group="$(id -gn "$user")" || die "no account $user"
  for controller in $V1_CONTROLLERS; do
    if [ ! -d "$ROOT/$controller" ]; then
      case "$controller" in
        memory|pids) die "no cgroup v1 $controller hierarchy at $ROOT/$controller: the grader cannot cap submissions" ;;
        *) warn "no cgroup v1 $controller hierarchy at $ROOT/$controller: submissions get no CPU cap or count"
           continue ;;
      esac
    fi
    mkdir -p "$ROOT/$controller/$name"  # (cpu and cpuacct mounted together: the same folder twice)
    chown "$user:$group" "$ROOT/$controller/$name"
  done
}

enable() {  # enable FOLDER: memory, pids and cpu (those it has) for the groups below FOLDER, in one write
  wanted=""
  for controller in $V2_CONTROLLERS; do
    if grep -qw "$controller" "$1/cgroup.controllers"; then wanted="$wanted +$controller"
    else warn "the $controller controller is not available in $1"; fi
  done
  [ -z "$wanted" ] || echo "${wanted# }" > "$1/cgroup.subtree_control" || warn "could not enable$wanted in $1"
}

delegate() {  # delegate FOLDER USER GROUP: what the kernel's "Delegation" section lists
  chown "$2:$3" "$1"
  for file in cgroup.procs cgroup.subtree_control cgroup.threads; do
    [ ! -e "$1/$file" ] || chown "$2:$3" "$1/$file"
  done
}

hub_v2() {  # hub_v2 USER PID
  user="$1" pid="$2"
  group="$(id -gn "$user")" || die "no account $user"
  own="$(sed -n 's/^0:://p' "$PROC/$pid/cgroup")"
  [ -n "$own" ] || die "$PROC/$pid/cgroup names no cgroup v2 group"
  unit="${own%/hub}"  # (the start script run again in the same unit)
  unit="${unit%/}"
  [ -n "$unit" ] || die "the hub runs in the root cgroup, not in a unit of its own: nothing to delegate"
  mkdir -p "$ROOT$unit/hub"
  for moved in $(cat "$ROOT$unit/cgroup.procs") "$pid"; do
    echo "$moved" > "$ROOT$unit/hub/cgroup.procs" 2>/dev/null || true  # (one that ended meanwhile)
  done
  enable "$ROOT$unit"
  mkdir -p "$ROOT$unit/grading/service"
  enable "$ROOT$unit/grading"
  delegate "$ROOT$unit/grading" "$user" "$group"
  delegate "$ROOT$unit/grading/service" "$user" "$group"
  echo "AUTOGRADER_CGROUP_PARENT=$unit/grading"
  echo "COURSE_SERVICE_CGROUP=$unit/grading/service"
  echo "COURSE_SERVICE_CGROUP_EXEC=$SELF"
}

hub() {  # hub NAME USER PID
  if ! is_v2; then
    setup "$1" "$2"
    echo "AUTOGRADER_CGROUP_PARENT=/$1"
  elif [ "${HUB_CGROUP_DELEGATED:-}" = 1 ]; then
    hub_v2 "$2" "$3"
  else
    warn "cgroup v2, and the hub does not run in its systemd unit (Delegate=yes): the grader account gets no" \
         "cgroup subtree, so grading cannot cap each submission's total memory and CPU. Start the hub with" \
         "systemctl start <course>-hub (deploy/README.md, One machine)."
  fi
}

exec_as() {  # exec_as CGROUP USER -- COMMAND...
  cgroup="$1" user="$2"
  shift 2
  [ "${1:-}" = -- ] && shift
  [ "$#" -gt 0 ] || die "exec: no command"
  command -v setpriv >/dev/null || die "setpriv (util-linux) is missing"
  entry="$(getent passwd "$user")" || die "no account $user"
  home="$(echo "$entry" | cut -d: -f6)" shell="$(echo "$entry" | cut -d: -f7)"
  echo $$ > "$ROOT$cgroup/cgroup.procs"
  exec setpriv --reuid="$(id -u "$user")" --regid="$(id -g "$user")" --init-groups \
       env HOME="$home" USER="$user" LOGNAME="$user" SHELL="$shell" "$@"
}

[ "$(id -u)" = 0 ] || die "run me as root"
command="${1:-}"
[ "$#" -gt 0 ] && shift
case "$command" in
  setup) [ "$#" = 2 ] || die "usage: cgroups.sh setup NAME USER"; setup "$@" ;;
  hub) [ "$#" = 3 ] || die "usage: cgroups.sh hub NAME USER PID"; hub "$@" ;;
  exec) [ "$#" -ge 3 ] || die "usage: cgroups.sh exec CGROUP USER -- COMMAND..."; exec_as "$@" ;;
  *) die "usage: cgroups.sh setup NAME USER | hub NAME USER PID | exec CGROUP USER -- COMMAND..." ;;
esac
