/* SPDX-License-Identifier: MIT */
/*
 * status_watch.c - `fencelock status --watch`: the region refreshed every
 * INTERVAL, with rates per second, most active keys first (like top).
 *
 * On a terminal the view uses the alternate screen and is cut to the window;
 * elsewhere each refresh prints the whole view.  Every read of the mapping
 * goes through guarded_read() (status_snapshot.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "guard.h"
#include "status.h"

/* Longest key or name shown on a terminal; longer ones end in "...". */
#define WATCH_NAME_MAX 48
/* The size of a terminal that does not say its own (TIOCGWINSZ). */
#define TERMINAL_ROWS 24
#define TERMINAL_COLS 80

/* A row of the keys table.  The lock comes first, so that the columns of
 * the locks table (status_columns.c) read a key_row as the fl_lock_info it
 * starts with; the record_row likewise. */
struct key_row {
    fl_lock_info l;
    char key[ESCAPED_MAX]; /* as shown */
    uint64_t commits;      /* over the records the key fences */
    uint64_t rejected;     /* their rejections, plus renewals and releases refused */
    uint64_t repeats;
    bool have_rate;
    double acq, commit, rej, take; /* per second */
};

struct record_row {
    fl_record_info c;
    char name[ESCAPED_MAX], key[ESCAPED_MAX];
    bool have_rate;
    double commit, rej, rep;
};

_Static_assert(offsetof(struct key_row, l) == 0, "a key_row is read as its lock");
_Static_assert(offsetof(struct record_row, c) == 0, "a record_row is read as its record");

/* Counters of the previous refresh, by slot, to take rates from. */
struct key_count {
    bool seen;
    uint64_t acq, commits, rejected, take;
};
struct record_count {
    bool seen;
    uint64_t commits, rejected, repeats;
};

struct watch {
    const char *path;
    const char *prefix;
    uint64_t interval_ns;
    bool tty;
    struct snapshot s;
    struct key_row *keys;
    struct record_row *recs;
    struct key_count *prev_keys;
    size_t n_prev_keys;
    struct record_count *prev_recs;
    size_t n_prev_recs;
    bool have_prev;
    uint64_t prev_ns;
    uint64_t unix_ns; /* when the current view was taken */
    bool have_total;
    double acq, commit, rej, take; /* per second over the keys shown */
};

/* A key or name as the watch view shows it: escaped, cut on a terminal. */
static void watch_name(const char *s, char *out, size_t cap, bool cut)
{
    fl__keytext(s, out, cap);
    if (cut && strlen(out) > WATCH_NAME_MAX)
        snprintf(out + WATCH_NAME_MAX - 3, cap - (WATCH_NAME_MAX - 3), "...");
}

static double per_second(uint64_t now, uint64_t before, double seconds)
{
    return now >= before ? (double)(now - before) / seconds : 0;
}

static int by_activity_key(const void *a, const void *b)
{
    const struct key_row *x = a, *y = b;
    double ax = x->acq + x->commit + x->rej, ay = y->acq + y->commit + y->rej;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    return strcmp(x->l.key, y->l.key);
}

static int by_activity_record(const void *a, const void *b)
{
    const struct record_row *x = a, *y = b;
    double ax = x->commit + x->rej, ay = y->commit + y->rej;
    if (ax != ay)
        return ax > ay ? -1 : 1;
    return strcmp(x->c.name, y->c.name);
}

static int by_key_name(const void *a, const void *b)
{
    const struct key_row *const *x = a, *const *y = b;
    return strcmp((*x)->l.key, (*y)->l.key);
}

static int find_key_name(const void *key, const void *elem)
{
    const struct key_row *const *row = elem;
    return strcmp(key, (*row)->l.key);
}

/* Add each record's counters to the row of the key that fences it. */
static int add_record_counts(struct watch *w)
{
    struct snapshot *s = &w->s;
    if (s->n_locks == 0)
        return CLI_EXIT_OK;
    struct key_row **by_name = calloc(s->n_locks, sizeof *by_name);
    if (!by_name)
        return out_of_memory("--watch");
    for (size_t i = 0; i < s->n_locks; i++)
        by_name[i] = &w->keys[i];
    qsort(by_name, s->n_locks, sizeof *by_name, by_key_name);
    for (size_t i = 0; i < s->n_records; i++) {
        const fl_record_info *c = &s->records[i];
        if (!c->bound_key[0])
            continue;
        struct key_row **row =
            bsearch(c->bound_key, by_name, s->n_locks, sizeof *by_name, find_key_name);
        if (row) {
            (*row)->commits += c->commits;
            (*row)->rejected += c->rejections;
            (*row)->repeats += c->repeats;
        }
    }
    free(by_name);
    return CLI_EXIT_OK;
}

/* Read the region again and work out the rows, their rates and order.  A
 * region truncated under us sets *truncated (see guarded_read). */
static int watch_refresh(struct watch *w, fl_region *r, bool *truncated)
{
    struct snapshot *s = &w->s;
    free_snapshot(s);
    int rc = guarded_read(r, w->path, s, truncated);
    if (rc != CLI_EXIT_OK)
        return rc;
    uint64_t now = fl__monotonic_clock_ns();
    w->unix_ns = fl__wall_clock_ns();
    filter_prefix(s, w->prefix);

    free(w->keys);
    free(w->recs);
    w->keys = calloc(s->n_locks + 1, sizeof *w->keys);
    w->recs = calloc(s->n_records + 1, sizeof *w->recs);
    struct key_count *kc = calloc((size_t)s->region.locks_used + 1, sizeof *kc);
    struct record_count *rcnt = calloc((size_t)s->region.records_used + 1, sizeof *rcnt);
    if (!w->keys || !w->recs || !kc || !rcnt) {
        free(kc);
        free(rcnt);
        return out_of_memory("--watch");
    }
    for (size_t i = 0; i < s->n_locks; i++) {
        struct key_row *k = &w->keys[i];
        k->l = s->locks[i];
        k->rejected = k->l.renew_failed + k->l.release_failed;
        watch_name(k->l.key, k->key, sizeof k->key, w->tty);
    }
    rc = add_record_counts(w);
    if (rc != CLI_EXIT_OK) {
        free(kc);
        free(rcnt);
        return rc;
    }
    double dt =
        w->have_prev && now > w->prev_ns ? (double)(now - w->prev_ns) / CLI_NS_PER_S : 0;
    w->have_total = dt > 0;
    w->acq = w->commit = w->rej = w->take = 0;
    for (size_t i = 0; i < s->n_locks; i++) {
        struct key_row *k = &w->keys[i];
        uint32_t slot = s->lock_slots[i];
        struct key_count cur = {true, k->l.acquisitions, k->commits, k->rejected,
                                k->l.expiries_taken};
        if (slot < s->region.locks_used)
            kc[slot] = cur;
        if (dt > 0) {
            /* A key created since the last refresh: all its counts are new. */
            struct key_count before = {0};
            if (slot < w->n_prev_keys && w->prev_keys[slot].seen)
                before = w->prev_keys[slot];
            k->have_rate = true;
            k->acq = per_second(cur.acq, before.acq, dt);
            k->commit = per_second(cur.commits, before.commits, dt);
            k->rej = per_second(cur.rejected, before.rejected, dt);
            k->take = per_second(cur.take, before.take, dt);
            w->acq += k->acq;
            w->commit += k->commit;
            w->rej += k->rej;
            w->take += k->take;
        }
    }
    for (size_t i = 0; i < s->n_records; i++) {
        struct record_row *c = &w->recs[i];
        c->c = s->records[i];
        watch_name(c->c.name, c->name, sizeof c->name, w->tty);
        if (c->c.bound_key[0])
            watch_name(c->c.bound_key, c->key, sizeof c->key, w->tty);
        else
            snprintf(c->key, sizeof c->key, "-");
        uint32_t slot = s->record_slots[i];
        struct record_count cur = {true, c->c.commits, c->c.rejections, c->c.repeats};
        if (slot < s->region.records_used)
            rcnt[slot] = cur;
        if (dt > 0) {
            struct record_count before = {0};
            if (slot < w->n_prev_recs && w->prev_recs[slot].seen)
                before = w->prev_recs[slot];
            c->have_rate = true;
            c->commit = per_second(cur.commits, before.commits, dt);
            c->rej = per_second(cur.rejected, before.rejected, dt);
            c->rep = per_second(cur.repeats, before.repeats, dt);
        }
    }
    free(w->prev_keys);
    free(w->prev_recs);
    w->prev_keys = kc;
    w->n_prev_keys = s->region.locks_used;
    w->prev_recs = rcnt;
    w->n_prev_recs = s->region.records_used;
    w->prev_ns = now;
    w->have_prev = true;
    qsort(w->keys, s->n_locks, sizeof *w->keys, by_activity_key);
    qsort(w->recs, s->n_records, sizeof *w->recs, by_activity_record);
    return CLI_EXIT_OK;
}

static void rate_cell(bool have, double v, char *buf, size_t cap)
{
    if (have)
        snprintf(buf, cap, "%.1f", v);
    else
        snprintf(buf, cap, "-");
}

/* The watch view's columns: those of the locks and records tables for what
 * a key or a record holds (status_columns.c), and its own, text only, for
 * the shown names, the rates and the sums over a key's records.  Its --json
 * is the document of status_json.c. */
#define RATE_TEXT(fn, type, field)                                                        \
    static void fn(const void *row, char *buf, size_t cap)                                \
    {                                                                                     \
        const type *x = row;                                                              \
        rate_cell(x->have_rate, x->field, buf, cap);                                      \
    }
#define NUMBER_TEXT(fn, type, field)                                                      \
    static void fn(const void *row, char *buf, size_t cap)                                \
    {                                                                                     \
        snprintf(buf, cap, "%" PRIu64, (uint64_t)((const type *)row)->field);             \
    }

static void wk_key(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const struct key_row *)row)->key);
}
RATE_TEXT(wk_acq_rate, struct key_row, acq)
RATE_TEXT(wk_commit_rate, struct key_row, commit)
RATE_TEXT(wk_rej_rate, struct key_row, rej)
RATE_TEXT(wk_take_rate, struct key_row, take)
NUMBER_TEXT(wk_commits, struct key_row, commits)
NUMBER_TEXT(wk_rejected, struct key_row, rejected)
NUMBER_TEXT(wk_repeats, struct key_row, repeats)

/* A column of the watch view's own: its header, what it holds (a number
 * aligns right), what it means, and its text. */
#define WATCH_COLUMN(name, format, help, text) {name, NULL, 0, help, FL_INFO_##format, NULL, text}

static const struct status_column
    wk_key_col = WATCH_COLUMN("KEY", TEXT, "the key, escaped (cut to 48 bytes on a terminal)",
                              wk_key),
    wk_acq_rate_col = WATCH_COLUMN("ACQ/S", NUM, "acquisitions", wk_acq_rate),
    wk_commit_rate_col =
        WATCH_COLUMN("COMMIT/S", NUM, "commits accepted on the key's records", wk_commit_rate),
    wk_rej_rate_col = WATCH_COLUMN("REJ/S", NUM,
                                   "fencing rejections: commits refused on the key's records "
                                   "plus renewals and releases refused as stale",
                                   wk_rej_rate),
    wk_take_rate_col = WATCH_COLUMN("TAKEOVER/S", NUM, "expired leases taken over", wk_take_rate),
    wk_commits_col =
        WATCH_COLUMN("COMMITS", NUM, "total commits on the key's records", wk_commits),
    wk_rejected_col = WATCH_COLUMN("REJECTED", NUM, "total rejections (the same sum as REJ/S)",
                                   wk_rejected),
    wk_repeats_col =
        WATCH_COLUMN("REPEATS", NUM, "total repeats on the key's records", wk_repeats);

static const struct status_column *const watch_key_columns[] = {
    &wk_key_col,
    &lock_columns[LOCK_COL_state],
    &wk_acq_rate_col,
    &wk_commit_rate_col,
    &wk_rej_rate_col,
    &wk_take_rate_col,
    &lock_columns[LOCK_COL_waiters],
    &lock_columns[LOCK_COL_lease_left_ns],
    &lock_columns[LOCK_COL_holder_pid],
    &lock_columns[LOCK_COL_token],
    &lock_columns[LOCK_COL_acquisitions],
    &wk_commits_col,
    &wk_rejected_col,
    &wk_repeats_col,
    &lock_columns[LOCK_COL_expiries_taken],
};

static void wr_name(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const struct record_row *)row)->name);
}
static void wr_key(const void *row, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", ((const struct record_row *)row)->key);
}
RATE_TEXT(wr_commit_rate, struct record_row, commit)
RATE_TEXT(wr_rej_rate, struct record_row, rej)
RATE_TEXT(wr_rep_rate, struct record_row, rep)

static const struct status_column
    wr_name_col = WATCH_COLUMN("NAME", TEXT, "the record, escaped (cut on a terminal)", wr_name),
    wr_key_col = WATCH_COLUMN("KEY", TEXT, "the key that fences it, - if none", wr_key),
    wr_commit_rate_col = WATCH_COLUMN("COMMIT/S", NUM, "commits accepted", wr_commit_rate),
    wr_rej_rate_col = WATCH_COLUMN("REJ/S", NUM, "commits rejected", wr_rej_rate),
    wr_rep_rate_col = WATCH_COLUMN("REPEAT/S", NUM, "repeated rejections", wr_rep_rate);

static const struct status_column *const watch_record_columns[] = {
    &wr_name_col,
    &wr_key_col,
    &wr_commit_rate_col,
    &wr_rej_rate_col,
    &wr_rep_rate_col,
    &record_columns[RECORD_COL_accepted_token],
    &record_columns[RECORD_COL_commits],
    &record_columns[RECORD_COL_rejections],
    &record_columns[RECORD_COL_repeats],
};

/* A table of n rows showing at most room lines (0: no limit): when cut, the
 * last line says how many rows are left out. */
static void watch_section(FILE *f, const char *title, const struct status_column *const *cols,
                          size_t ncols, const void *rows, size_t row_size, size_t n, long room)
{
    fprintf(f, "%s\n", title);
    if (n == 0) {
        fputs("  (none)\n", f);
        return;
    }
    size_t shown = n;
    if (room > 0 && (size_t)room < n)
        shown = room > 1 ? (size_t)room - 1 : 0;
    if (print_columns(f, cols, ncols, rows, row_size, shown, false) != 0)
        fputs("  (out of memory)\n", f);
    if (shown < n)
        fprintf(f, "  ... and %zu more\n", n - shown);
}

/* The whole view; rows > 0 fits it into that many lines (a terminal). */
static void watch_render(FILE *f, const struct watch *w, long rows)
{
    const struct snapshot *s = &w->s;
    const fl_region_info *g = &s->region;
    char when[64], every[32], a[32], b[32], c[32], d[32];
    format_local_time(w->unix_ns, when, sizeof when);
    cli_format_duration(w->interval_ns, CLI_DURATION_BRIEF, every, sizeof every);
    fprintf(f, "fencelock status --watch  %s  every %s  region %s%s\n", when, every, s->path,
            w->tty ? "  (q: quit)" : "");
    if (s->supervisor_alive)
        fprintf(f, "supervisor pid %" PRIu32 " running", g->supervisor_pid);
    else
        fputs("supervisor not running", f);
    fprintf(f,
            "  epoch %" PRIu64 "  keys %" PRIu32 "/%" PRIu32 "  records %" PRIu32 "/%" PRIu32
            "  clients %zu  log events dropped %" PRIu64 "\n",
            g->epoch, g->locks_used, g->lock_capacity, g->records_used, g->record_capacity,
            s->n_clients, g->events_dropped);
    rate_cell(w->have_total, w->acq, a, sizeof a);
    rate_cell(w->have_total, w->commit, b, sizeof b);
    rate_cell(w->have_total, w->rej, c, sizeof c);
    rate_cell(w->have_total, w->take, d, sizeof d);
    fprintf(f, "per second: %s acquisitions  %s commits  %s rejections  %s takeovers\n", a, b,
            c, d);
    long header = 3; /* the lines written so far */
    uint32_t skipped_locks = skipped_total(s->skipped.locks),
             skipped_records = skipped_total(s->skipped.records);
    if (skipped_locks || skipped_records) {
        fputs("not listed:", f);
        for (int i = 0; i < SKIP_REASONS; i++) {
            if (s->skipped.locks[i])
                fprintf(f, "  %" PRIu32 " of %" PRIu32 " lock slots (%s)",
                        s->skipped.locks[i], g->locks_used, skip_reasons[i].brief_lock);
            if (s->skipped.records[i])
                fprintf(f, "  %" PRIu32 " of %" PRIu32 " record slots (%s)",
                        s->skipped.records[i], g->records_used, skip_reasons[i].brief_record);
        }
        fputc('\n', f);
        header++;
    }
    if (w->prefix) {
        char p[ESCAPED_MAX];
        fl__keytext(w->prefix, p, sizeof p);
        fprintf(f, "prefix: %s\n", p);
        header++;
    }
    /* Each of the two sections takes a blank line, its title and its column
     * titles; the records get at least a third of what is left when the keys
     * would not leave them that. */
    const long section_lines = 3;
    long room_keys = 0, room_recs = 0;
    if (rows > 0) {
        long avail = rows - header - 2 * section_lines;
        long nk = (long)s->n_locks, nr = (long)s->n_records;
        if (avail < 2)
            avail = 2;
        if (nk + nr > avail) {
            long recs = avail / 3 > avail - nk ? avail / 3 : avail - nk;
            if (recs > nr)
                recs = nr;
            if (recs < 1)
                recs = 1;
            room_recs = recs;
            room_keys = avail - recs > 1 ? avail - recs : 1;
        }
    }
    fputc('\n', f);
    watch_section(f, "Keys", watch_key_columns, N_OF(watch_key_columns), w->keys,
                  sizeof *w->keys, s->n_locks, room_keys);
    fputc('\n', f);
    watch_section(f, "Records", watch_record_columns, N_OF(watch_record_columns), w->recs,
                  sizeof *w->recs, s->n_records, room_recs);
}

static void terminal_size(long *rows, long *cols)
{
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0) {
        *rows = ws.ws_row;
        *cols = ws.ws_col;
    } else {
        *rows = TERMINAL_ROWS;
        *cols = TERMINAL_COLS;
    }
}

/* Draw the view on the terminal: home, clear, and the lines cut to the
 * window, in one write (no flicker). */
static int watch_draw(const struct watch *w)
{
    long rows, cols;
    terminal_size(&rows, &cols);
    char *text = NULL, *frame = NULL;
    size_t text_len = 0, frame_len = 0;
    FILE *t = open_memstream(&text, &text_len);
    if (!t)
        return -ENOMEM;
    watch_render(t, w, rows);
    if (fclose(t) != 0)
        return -ENOMEM;
    FILE *out = open_memstream(&frame, &frame_len);
    if (!out) {
        free(text);
        return -ENOMEM;
    }
    fputs("\033[H\033[2J", out);
    long line = 0;
    for (char *p = text; *p && line < rows;) {
        char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (line > 0)
            fputc('\n', out); /* no newline after the last row: it would scroll */
        fwrite(p, 1, len > (size_t)cols ? (size_t)cols : len, out);
        line++;
        p += len + (end ? 1 : 0);
    }
    free(text);
    if (fclose(out) != 0)
        return -ENOMEM;
    int err = 0;
    for (size_t off = 0; off < frame_len;) {
        ssize_t n = write(STDOUT_FILENO, frame + off, frame_len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? -errno : -EIO;
            break;
        }
        off += (size_t)n;
    }
    free(frame);
    return err;
}

static void write_string(const char *s)
{
    size_t len = strlen(s);
    while (len > 0) {
        ssize_t n = write(STDOUT_FILENO, s, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return; /* the terminal is gone: nothing to restore */
        s += n;
        len -= (size_t)n;
    }
}

static volatile sig_atomic_t watch_signal, watch_resized;

static void on_watch_signal(int sig)
{
    if (sig == SIGWINCH)
        watch_resized = 1;
    else
        watch_signal = sig;
}

/* Push stdout out after a refresh: 0 go on, 1 the reader is gone (a closed
 * pipe: stop quietly), -1 an error (said on stderr). */
static int flush_refresh(void)
{
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout))
        return 0;
    if (errno == EPIPE)
        return 1;
    fprintf(stderr, "fencelock: cannot write the output: %s\n",
            errno ? strerror(errno) : "write error");
    return -1;
}

/* The terminal side of --watch: the alternate screen without a cursor, and
 * keys read one by one without echo (q and Ctrl-C quit). */
struct terminal {
    bool keys;  /* stdin is the terminal in raw mode */
    struct termios saved;
    sigset_t old_mask;
};

static void terminal_enter(struct terminal *t)
{
    sigset_t block;
    sigemptyset(&block);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGWINCH};
    for (size_t i = 0; i < N_OF(sigs); i++)
        sigaddset(&block, sigs[i]);
    /* Blocked except inside ppoll, which so never misses one. */
    sigprocmask(SIG_BLOCK, &block, &t->old_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_watch_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_OF(sigs); i++)
        sigaction(sigs[i], &sa, NULL);
    t->keys = false;
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &t->saved) == 0) {
        struct termios raw = t->saved;
        /* Ctrl-C comes as a byte, so that quitting is one path that restores. */
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO | ISIG | IEXTEN);
        raw.c_iflag &= ~(tcflag_t)(IXON | ICRNL);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        t->keys = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
    }
    write_string("\033[?1049h\033[?25l");
}

static void terminal_leave(struct terminal *t)
{
    write_string("\033[?25h\033[?1049l");
    if (t->keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &t->saved);
}

/* Wait on a terminal until deadline (monotonic ns), redrawing on resize.
 * Returns 1 to quit (q, Ctrl-C or a signal), 0 to refresh, -1 on a write
 * error. */
static int terminal_wait(struct terminal *t, const struct watch *w, uint64_t deadline)
{
    for (;;) {
        if (watch_signal)
            return 1;
        if (watch_resized) {
            watch_resized = 0;
            if (watch_draw(w) != 0)
                return -1;
        }
        uint64_t now = fl__monotonic_clock_ns();
        if (now >= deadline)
            return 0;
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / CLI_NS_PER_S), (long)(left % CLI_NS_PER_S)};
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        int n = ppoll(t->keys ? &p : NULL, t->keys ? 1 : 0, &ts, &t->old_mask);
        if (n <= 0)
            continue; /* a signal (looked at above) or the time is up */
        if (p.revents & POLLIN) {
            char buf[64];
            ssize_t k = read(STDIN_FILENO, buf, sizeof buf);
            for (ssize_t i = 0; i < k; i++) {
                if (buf[i] == 'q' || buf[i] == 'Q' || buf[i] == 3 /* Ctrl-C */ ||
                    buf[i] == 4 /* Ctrl-D */)
                    return 1;
                if (buf[i] == ' ')
                    return 0; /* refresh now */
            }
            if (k == 0)
                t->keys = false; /* end of input: keep watching, by time only */
        } else if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) {
            t->keys = false;
        }
    }
}

int watch_main(const struct watch_options *o, const char *path)
{
    fl_region *r;
    bool truncated = false;
    int rc = guarded_open(path, &r, &truncated);
    if (truncated)
        return cli_region_truncated(path);
    if (rc != CLI_EXIT_OK)
        return rc;
    /* A reader that went away shows up as EPIPE from a write, not a death. */
    signal(SIGPIPE, SIG_IGN);
    struct watch w;
    memset(&w, 0, sizeof w);
    w.path = path;
    w.prefix = o->prefix;
    w.interval_ns = o->interval_ns;
    w.tty = !o->json && isatty(STDOUT_FILENO);
    struct terminal term;
    memset(&term, 0, sizeof term);
    if (w.tty)
        terminal_enter(&term);
    uint64_t next = fl__monotonic_clock_ns();
    for (unsigned long frames = 0;;) {
        rc = watch_refresh(&w, r, &truncated);
        if (rc != CLI_EXIT_OK)
            break;
        frames++;
        if (w.tty) {
            if (watch_draw(&w) != 0) {
                rc = CLI_EXIT_RUNTIME;
                break;
            }
        } else {
            if (o->json)
                print_json(stdout, &w.s);
            else {
                if (frames > 1)
                    fputc('\n', stdout);
                watch_render(stdout, &w, 0);
            }
            int f = flush_refresh();
            if (f != 0) {
                rc = f > 0 ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
                break;
            }
        }
        if (o->count && frames >= o->count)
            break;
        uint64_t now = fl__monotonic_clock_ns();
        next += w.interval_ns;
        if (next <= now)
            next = now + w.interval_ns; /* fell behind (stopped?): no burst */
        if (w.tty) {
            int q = terminal_wait(&term, &w, next);
            if (q != 0) {
                rc = q > 0 ? CLI_EXIT_OK : CLI_EXIT_RUNTIME;
                break;
            }
            uint64_t woke = fl__monotonic_clock_ns();
            if (woke < next)
                next = woke; /* space: refresh now */
        } else {
            struct timespec ts = {(time_t)(next / CLI_NS_PER_S), (long)(next % CLI_NS_PER_S)};
            while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
            }
        }
    }
    if (w.tty)
        terminal_leave(&term);
    free_snapshot(&w.s);
    free(w.keys);
    free(w.recs);
    free(w.prev_keys);
    free(w.prev_recs);
    if (truncated)
        rc = cli_region_truncated(path); /* after the terminal is back */
    fl_close(r);
    if (watch_signal) {
        /* End by the signal, as if it had not been caught. */
        int sig = watch_signal;
        signal(sig, SIG_DFL);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig);
    }
    return rc;
}

