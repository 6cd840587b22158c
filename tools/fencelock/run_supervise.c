/* SPDX-License-Identifier: MIT */
/*
 * run_supervise.c - `fencelock run` once KEY is held: start the command,
 * forward signals to it, follow its job stops, end it and every process it
 * started when the lease is lost, and end what it leaves running when it
 * exits, so that KEY is released only when none of them is left.  The
 * descendants are found and signalled by run_tree.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "clocks.h"
#include "duration.h"
#include "fencelock.h"
#include "run.h"
#include "run_parts.h"
#include "run_tree.h"

/* While waiting for descendants to end after SIGTERM: how often to look
 * again (the exit of a process that is not our child wakes nobody here). */
#define RESCAN_MS 100

/* Signals forwarded to the command's process group. */
static const int forwarded_signals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM,
                                        SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH};

/* Send sig to the command's process group, and to the command itself if it
 * has left the group (setsid, setpgid): each process gets it once. */
static void signal_command(struct runner *rn, int sig)
{
    if (!rn->child_done && getpgid(rn->child) != rn->child)
        kill(rn->child, sig);
    kill(-rn->child, sig); /* ESRCH once the group is empty: nothing to do */
}

/* In the child, between fork and exec.  The parent is single-threaded at the
 * fork, so stdio and setenv are safe here. */
static void exec_command(struct runner *rn, int go_fd, pid_t parent)
{
    /* If fencelock run dies, the lock is freed at once: tell the command. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(RUN_EXIT_FAILED);
    setpgid(0, 0);
    if (rn->foreground)
        tcsetpgrp(STDIN_FILENO, getpid()); /* SIGTTOU is blocked: no stop */
    char token[32];
    snprintf(token, sizeof token, "%" PRIu64, rn->lease.token);
    if (setenv("FENCELOCK_KEY", rn->o->key, 1) != 0 ||
        setenv("FENCELOCK_TOKEN", token, 1) != 0 ||
        setenv(FL_REGION_ENV, rn->region_env, 1) != 0) {
        fl__say("cannot set the environment of %s: %s", rn->o->command[0], strerror(errno));
        _exit(RUN_EXIT_FAILED);
    }
    /* Wait until the lease is kept alive; EOF means the parent gave up. */
    char go;
    if (read(go_fd, &go, 1) != 1)
        _exit(RUN_EXIT_FAILED);
    sigprocmask(SIG_SETMASK, &rn->old_mask, NULL);
    sigaction(SIGPIPE, &rn->old_pipe, NULL); /* ignored only for our own messages */
    execvp(rn->o->command[0], rn->o->command);
    int e = errno;
    fl__say("cannot run '%s': %s", rn->o->command[0], strerror(e));
    _exit(e == ENOENT ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC);
}

/* The command was stopped from the terminal (^Z): stop as well, so that the
 * shell sees the job stopped and takes the terminal; when continued, hand the
 * terminal back if we are in front again, and continue the command. */
static void follow_job_stop(struct runner *rn)
{
    if (tcgetpgrp(STDIN_FILENO) == rn->child)
        tcsetpgrp(STDIN_FILENO, getpgrp());
    kill(getpid(), SIGSTOP); /* stops here until SIGCONT */
    if (tcgetpgrp(STDIN_FILENO) == getpgrp())
        tcsetpgrp(STDIN_FILENO, rn->child);
    signal_command(rn, SIGCONT);
}

/* Reap every child that has changed state: the command, and processes it
 * left behind (reparented to us, the subreaper).  follow_stops: a stop of
 * the command from the terminal stops us too (not while killing). */
static void reap(struct runner *rn, bool follow_stops)
{
    for (;;) {
        int st;
        pid_t w = waitpid(-1, &st, WNOHANG | (rn->foreground && follow_stops ? WUNTRACED : 0));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        if (w != rn->child)
            continue; /* an orphan of the command: reaped, nothing more */
        if (WIFSTOPPED(st)) {
            if (!rn->child_done)
                follow_job_stop(rn);
            continue;
        }
        rn->child_done = true;
        rn->child_status = st;
    }
}

/* ---- the command's descendants ---------------------------------------------- */

/* The lock covers the command and every process it starts (run_tree.h).
 * When they cannot be listed, the command and its process group stand for
 * them all. */

/* Send sig (then SIGCONT if cont, so that a stopped process can act on it)
 * to the command's process group and to every descendant outside it, each
 * once.  Returns how many live descendants are outside the group; -1 if
 * they cannot be listed (then the group and the command are signalled). */
static int signal_all(struct runner *rn, int sig, bool cont)
{
    int others = run_tree_signal(rn->child, sig, cont);
    if (others < 0) {
        signal_command(rn, sig);
        if (cont)
            signal_command(rn, SIGCONT);
    }
    return others;
}

static bool group_gone(const struct runner *rn)
{
    return kill(-rn->child, 0) != 0 && errno == ESRCH;
}

/* How many descendants are alive: > 0 or 0. */
static int count_alive(const struct runner *rn)
{
    int alive = run_tree_alive();
    if (alive < 0)
        alive = !rn->child_done || !group_gone(rn);
    return alive;
}

/* Without /proc: wait for the command and the rest of its group that are
 * our children.  SIGKILL cannot be caught, so this ends. */
static void reap_killed(struct runner *rn)
{
    int st;
    while (!rn->child_done) {
        pid_t w = waitpid(rn->child, &st, 0);
        if (w == rn->child && !WIFSTOPPED(st)) {
            rn->child_done = true;
            rn->child_status = st;
        } else if (w < 0 && errno != EINTR) {
            break;
        }
    }
    while (waitpid(-rn->child, &st, 0) > 0 || errno == EINTR) {
    }
}

/* SIGKILL the command's group and every descendant, wait until none is
 * alive, and reap those that are our children.  SIGKILL cannot be caught,
 * so this ends (unless a process hangs uninterruptibly in the kernel: then
 * the lock stays held with it, which is what it must do). */
/* SIGKILL the command's group and every descendant, wait until none is
 * alive, and reap those that are our children.  SIGKILL cannot be caught,
 * so this ends (unless a process hangs uninterruptibly in the kernel: then
 * the lock stays held with it, which is what it must do). */
static void kill_all(struct runner *rn)
{
    for (;;) {
        int alive = run_tree_kill_round(rn->child);
        if (alive < 0) {
            signal_command(rn, SIGKILL);
            reap_killed(rn);
            return;
        }
        reap(rn, false);
        if (alive == 0)
            return;
    }
}

static void send_kill(struct runner *rn)
{
    char grace[32];
    cli_format_duration(rn->o->kill_after_ns, CLI_DURATION_EXACT, grace, sizeof grace);
    int alive = count_alive(rn);
    if (alive > 0)
        signal_all(rn, SIGKILL, false); /* first: the report may block or fail */
    rn->kill_sent = true;
    if (rn->term_sent && alive > 0) {
        if (rn->leftovers)
            fl__say("%d process%s left by %s still running %s after SIGTERM; sending SIGKILL",
                    alive, alive == 1 ? "" : "es", rn->o->command[0], grace);
        else
            fl__say("%s (process group %d) is still running %s after SIGTERM; sending SIGKILL",
                    rn->o->command[0], (int)rn->child, grace);
    }
    kill_all(rn);
}

static void lease_lost(struct runner *rn, int err)
{
    if (rn->lost)
        return;
    rn->lost = true;
    rn->lost_err = err ? err : -ESTALE;
    if (rn->child_done)
        return; /* reported when we finish; what it left is ending already */
    /* Act first, report after: a report to a stderr whose reader is gone or
     * does not read must not keep a stale command running. */
    bool now = rn->o->kill_after_ns == 0;
    int others = signal_all(rn, now ? SIGKILL : SIGTERM, !now);
    if (!now) {
        rn->term_sent = true;
        rn->kill_at = fl__monotonic_clock_ns() + rn->o->kill_after_ns;
    }
    const char *why = rn->lost_err == -ESTALE
                          ? "the lease ran out or another process took the key"
                          : fl_strerror(rn->lost_err);
    char outside[96] = "";
    if (others > 0)
        snprintf(outside, sizeof outside, " and %d process%s it started outside that group",
                 others, others == 1 ? "" : "es");
    fl__say("lost the lease of '%s' (token %" PRIu64 ": %s); %s %s (process group %d)%s",
            rn->o->key_text, rn->lease.token, why,
            now ? "sending SIGKILL to" : "sending SIGTERM to", rn->o->command[0], (int)rn->child,
            outside);
    rn->loss_said = true;
    if (now)
        send_kill(rn);
}

/* The command exited and alive of its descendants still run: end them
 * before the lock is released, the same way as after a loss. */
static void end_leftovers(struct runner *rn, int alive)
{
    bool now = rn->o->kill_after_ns == 0;
    rn->leftovers = true;
    signal_all(rn, now ? SIGKILL : SIGTERM, !now);
    if (!now) {
        rn->term_sent = true;
        rn->kill_at = fl__monotonic_clock_ns() + rn->o->kill_after_ns;
    }
    fl__say("%s exited and left %d process%s running; sending %s to %s before releasing '%s'",
            rn->o->command[0], alive, alive == 1 ? "" : "es", now ? "SIGKILL" : "SIGTERM",
            alive == 1 ? "it" : "them", rn->o->key_text);
    if (now)
        send_kill(rn);
}

/* Read the signalfd dry: forward, or reap on SIGCHLD. */
static int drain_signals(struct runner *rn)
{
    for (;;) {
        struct signalfd_siginfo si;
        ssize_t n = read(rn->sfd, &si, sizeof si);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n != (ssize_t)sizeof si) {
            fl__say("cannot read signals: %s", n < 0 ? strerror(errno) : "short read");
            return -1;
        }
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD)
            reap(rn, true);
        else if (sig != SIGTTOU) /* only blocked, for tcsetpgrp */
            signal_command(rn, sig);
    }
}

/* Milliseconds until the SIGKILL is due, rounded up, and at most RESCAN_MS
 * (descendants that are not our children end unseen); -1 if none is due. */
static int poll_timeout(const struct runner *rn)
{
    if (!rn->term_sent || rn->kill_sent)
        return -1;
    uint64_t now = fl__monotonic_clock_ns();
    if (now >= rn->kill_at)
        return 0;
    uint64_t ms = (rn->kill_at - now + CLI_NS_PER_MS - 1) / CLI_NS_PER_MS; /* rounded up */
    return ms > RESCAN_MS ? RESCAN_MS : (int)ms;
}

/* Until the command and every process it started have ended (the last ones
 * by SIGKILL at the latest).  0, or -1 on a failure of our own. */
int run_supervise(struct runner *rn)
{
    int kfd = fl_keepalive_fd(rn->k);
    for (;;) {
        if (rn->child_done) {
            if (rn->kill_sent)
                return 0;
            int alive = count_alive(rn);
            if (alive == 0)
                return 0;
            if (!rn->term_sent)
                end_leftovers(rn, alive);
            if (rn->kill_sent)
                return 0;
        }
        /* The eventfd stays readable once the lease is lost: stop polling it. */
        struct pollfd p[2] = {{.fd = rn->sfd, .events = POLLIN},
                              {.fd = rn->lost ? -1 : kfd, .events = POLLIN}};
        int n = poll(p, 2, poll_timeout(rn));
        if (n < 0 && errno != EINTR) {
            fl__say("poll: %s", strerror(errno));
            return -1;
        }
        if (n > 0 && (p[0].revents & POLLIN) && drain_signals(rn) != 0)
            return -1;
        if (n > 0 && p[1].revents)
            lease_lost(rn, fl_keepalive_status(rn->k, NULL));
        if (rn->term_sent && !rn->kill_sent && fl__monotonic_clock_ns() >= rn->kill_at)
            send_kill(rn);
    }
}

static int exit_status_of(int st)
{
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return RUN_EXIT_FAILED;
}

/* Stop renewing, release, and choose the exit status. */
int run_finish(struct runner *rn, int failed)
{
    fl_lease l = rn->lease;
    int err = fl_keepalive_stop(rn->k, &l);
    rn->k = NULL;
    if (err && !rn->lost) {
        rn->lost = true;
        rn->lost_err = err;
    }
    /* Also after a loss: an expired lease nobody took over is freed. */
    err = fl_release(rn->r, &l);
    if (err == -ESTALE && !rn->lost) {
        rn->lost = true;
        rn->lost_err = err;
    } else if (err && err != -ESTALE) {
        fl__say("cannot release '%s': %s", rn->o->key_text, fl__library_error(err));
        failed = 1;
    }
    if (rn->foreground && tcgetpgrp(STDIN_FILENO) == rn->child)
        tcsetpgrp(STDIN_FILENO, getpgrp());
    if (failed)
        return RUN_EXIT_FAILED;
    int status = exit_status_of(rn->child_status);
    if (rn->lost) {
        if (!rn->loss_said)
            fl__say("lost the lease of '%s' (token %" PRIu64 ": %s) while %s ran; it exited with "
                    "status %d",
                    rn->o->key_text, rn->lease.token,
                    rn->lost_err == -ESTALE ? "the lease ran out or another process took the key"
                                            : fl_strerror(rn->lost_err),
                    rn->o->command[0], status);
        return RUN_EXIT_LEASE_LOST;
    }
    return status;
}

/* Block what we forward, and SIGCHLD and SIGTTOU, and read them from a
 * signalfd.  The keepalive thread, started later, inherits the mask, so no
 * thread of ours takes these signals the default way. */
int run_setup_signals(struct runner *rn)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof forwarded_signals / sizeof forwarded_signals[0]; i++)
        sigaddset(&set, forwarded_signals[i]);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTTOU);
    if (sigprocmask(SIG_BLOCK, &set, &rn->old_mask) != 0) {
        fl__say("sigprocmask: %s", strerror(errno));
        return -1;
    }
    rn->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (rn->sfd < 0) {
        fl__say("signalfd: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Start the command held before exec, keep the lease alive, let it go. */
int run_start_command(struct runner *rn)
{
    int go[2];
    if (pipe2(go, O_CLOEXEC) != 0) {
        fl__say("pipe: %s", strerror(errno));
        return -1;
    }
    rn->foreground = isatty(STDIN_FILENO) && tcgetpgrp(STDIN_FILENO) == getpgrp();
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fl__say("fork: %s", strerror(errno));
        close(go[0]);
        close(go[1]);
        return -1;
    }
    if (pid == 0) {
        close(go[1]);
        exec_command(rn, go[0], parent);
    }
    close(go[0]);
    rn->child = pid;
    /* Also here, so that the group exists before we signal it. */
    setpgid(pid, pid);
    if (rn->foreground)
        tcsetpgrp(STDIN_FILENO, pid);
    int err = fl_keepalive_start(rn->r, &rn->lease, rn->o->lease_ns, NULL, NULL, &rn->k);
    if (err) {
        close(go[1]); /* the command exits without running */
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (rn->foreground && tcgetpgrp(STDIN_FILENO) == pid)
            tcsetpgrp(STDIN_FILENO, getpgrp());
        if (err == -ESTALE) {
            fl__say("lost the lease of '%s' (token %" PRIu64 ") before %s could start",
                    rn->o->key_text, rn->lease.token, rn->o->command[0]);
            fl_release(rn->r, &rn->lease);
            return RUN_EXIT_LEASE_LOST;
        }
        fl__say("cannot keep the lease of '%s' alive: %s", rn->o->key_text,
                fl__library_error(err));
        fl_release(rn->r, &rn->lease);
        return -1;
    }
    if (write(go[1], "g", 1) != 1) {
        /* The child died before exec (it was killed): its status tells. */
    }
    close(go[1]);
    return 0;
}

void run_kill_unwatched(struct runner *rn)
{
    if (count_alive(rn) == 0)
        return;
    signal_all(rn, SIGKILL, false);
    fl__say("stopping %s (process group %d) and every process it started", rn->o->command[0],
            (int)rn->child);
    rn->kill_sent = true;
    kill_all(rn);
}
