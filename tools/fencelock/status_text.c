/* SPDX-License-Identifier: MIT */
/*
 * status_text.c - `fencelock status` for people: the region block, then the
 * clients, locks and records tables.
 *
 * libsmartcols draws the tables (as it does for lslocks and lsblk), with the
 * columns that -o chose from status_columns.c.  Every table is indented by
 * two blanks under its title and its columns are two blanks apart; numbers
 * align right under their titles, and no line ends in blanks.
 */
#include <errno.h>
#include <inttypes.h>
#include <libsmartcols.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "status.h"

/* A key or name that wraps on a terminal keeps at least this width (or its
 * title's), however little room the other columns leave: narrower, a key
 * would be read in slices of a few bytes. */
#define WRAP_MIN 16

/* The width of the terminal that stdout is, or 0 when it is none (a pipe,
 * a file): only a terminal gets its tables fitted. */
static size_t terminal_width(void)
{
    if (!isatty(STDOUT_FILENO))
        return 0;
    struct winsize ws;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *env = getenv("COLUMNS");
    long v = env ? strtol(env, NULL, 10) : 0;
    return v > 0 && v < 100000 ? (size_t)v : 80;
}

/* The widths the wrapping columns get in a table of width cols: what the
 * other columns (widths[], natural) leave is shared out, a column that needs
 * less than its share keeping its own width, none narrower than WRAP_MIN or
 * its title.  wrap[c] says which columns may wrap; their widths[] are
 * replaced. */
static void share_width(size_t cols, const bool *wrap, const char *const *titles, size_t *widths,
                        size_t ncols)
{
    size_t fixed = 2 + 2 * (ncols - 1); /* indent and separators */
    size_t want[STATUS_MAX_COLUMNS];
    bool done[STATUS_MAX_COLUMNS] = {false};
    for (size_t c = 0; c < ncols; c++) {
        want[c] = widths[c];
        if (!wrap[c]) {
            fixed += widths[c];
            done[c] = true;
        }
    }
    size_t room = cols > fixed ? cols - fixed : 0;
    for (;;) {
        size_t left = room, open = 0;
        for (size_t c = 0; c < ncols; c++) {
            if (!wrap[c])
                continue;
            if (done[c])
                left = left > widths[c] ? left - widths[c] : 0;
            else
                open++;
        }
        if (open == 0)
            return;
        size_t share = left / open;
        bool settled = false;
        for (size_t c = 0; c < ncols; c++)
            if (!done[c] && want[c] <= share) {
                done[c] = true; /* fits its share: its own width */
                settled = true;
            }
        if (settled)
            continue; /* what it did not take is shared again */
        for (size_t c = 0; c < ncols; c++) {
            if (done[c])
                continue;
            size_t floor = strlen(titles[c]) > WRAP_MIN ? strlen(titles[c]) : WRAP_MIN;
            widths[c] = share > floor ? share : floor < want[c] ? floor : want[c];
        }
        return;
    }
}

/* Cut an escaped cell (fl__keytext: "\\" and "\xNN" are never split) into
 * lines of at most width columns, written to out as "LINE\nLINE...", which
 * libsmartcols prints one under the other (scols_wrapnl_nextchunk). */
static void wrap_cell(const char *s, size_t width, char *out, size_t cap)
{
    size_t o = 0, col = 0;
    while (*s) {
        size_t t = s[0] == '\\' ? strnlen(s, s[1] == 'x' ? 4 : 2) : 1;
        if (o + t + 2 > cap)
            break; /* cannot happen: cap has room for a newline per byte */
        if (col > 0 && col + t > width) {
            out[o++] = '\n';
            col = 0;
        }
        memcpy(out + o, s, t);
        o += t;
        s += t;
        col += t;
    }
    out[o] = '\0';
}

int print_columns(FILE *f, const struct status_column *const *cols, size_t ncols,
                  const void *rows, size_t row_size, size_t n, bool fit)
{
    char cell[CELL_MAX];
    /* On a terminal, keys and names wrap within their cells when the row
     * would not fit: one long key costs lines, not the width of every row,
     * and is still read whole.  The other columns never shrink (a number
     * cut would lie).  A pipe or a file gets every cell on one line. */
    size_t term = fit ? terminal_width() : 0;
    size_t widths[STATUS_MAX_COLUMNS] = {0};
    bool wrap[STATUS_MAX_COLUMNS] = {false}, wrapped = false;
    if (term && ncols > 0) {
        const char *titles[STATUS_MAX_COLUMNS];
        size_t total = 2 + 2 * (ncols - 1);
        for (size_t c = 0; c < ncols; c++) {
            titles[c] = cols[c]->name;
            widths[c] = strlen(cols[c]->name);
            for (size_t r = 0; r < n; r++) {
                column_text(cols[c], (const char *)rows + r * row_size, cell, sizeof cell);
                size_t len = strlen(cell);
                if (len > widths[c])
                    widths[c] = len;
            }
            total += widths[c];
            wrap[c] = column_wraps(cols[c]);
        }
        if (total > term)
            share_width(term, wrap, titles, widths, ncols);
        else
            memset(wrap, 0, sizeof wrap); /* it fits as it is */
    }

    struct libscols_table *tb = scols_new_table();
    if (!tb)
        return -ENOMEM;
    int err = 0;
    /* Cells are already escaped (fl__keytext): libsmartcols need not. */
    scols_table_enable_noencoding(tb, 1);
    /* libsmartcols never cuts a cell to the terminal: what wraps is decided
     * above, what does not shrink is kept whole. */
    scols_table_set_termforce(tb, SCOLS_TERMFORCE_NEVER);
    if (scols_table_set_column_separator(tb, "  ") != 0)
        err = -ENOMEM;
    for (size_t c = 0; c < ncols && !err; c++) {
        struct libscols_column *cl = scols_table_new_column(
            tb, cols[c]->name, 0,
            (column_right(cols[c]) ? SCOLS_FL_RIGHT : 0) | (wrap[c] ? SCOLS_FL_WRAP : 0));
        if (!cl ||
            (wrap[c] &&
             scols_column_set_wrapfunc(cl, scols_wrapnl_chunksize, scols_wrapnl_nextchunk,
                                       NULL) != 0))
            err = -ENOMEM;
    }
    char lines[2 * CELL_MAX]; /* a cell with a newline after every byte at most */
    for (size_t r = 0; r < n && !err; r++) {
        const void *row = (const char *)rows + r * row_size;
        struct libscols_line *ln = scols_table_new_line(tb, NULL);
        if (!ln) {
            err = -ENOMEM;
            break;
        }
        for (size_t c = 0; c < ncols && !err; c++) {
            column_text(cols[c], row, cell, sizeof cell);
            const char *data = cell;
            if (wrap[c] && strlen(cell) > widths[c]) {
                wrap_cell(cell, widths[c], lines, sizeof lines);
                data = lines;
                wrapped = true;
            }
            if (scols_line_set_data(ln, c, data) != 0)
                err = -ENOMEM;
        }
    }
    char *text = NULL;
    if (!err && scols_print_table_to_string(tb, &text) != 0)
        err = -ENOMEM;
    scols_unref_table(tb);
    if (err) {
        free(text);
        return err;
    }
    /* Indent every line (libsmartcols does not pad the last column, and
     * ends the last line without a newline).  The further lines of a
     * wrapped cell are padded to the last column: not left ending in
     * blanks. */
    for (char *p = text; *p;) {
        size_t len = strcspn(p, "\n"), shown = len;
        while (wrapped && shown > 0 && p[shown - 1] == ' ')
            shown--;
        fputs("  ", f);
        fwrite(p, 1, shown, f);
        fputc('\n', f);
        p += len + (p[len] == '\n');
    }
    free(text);
    return 0;
}

/* An etcd region (docs/etcd.md): what etcd lets the library know. */
static void print_etcd_region(FILE *f, const struct snapshot *s)
{
    const fl_region_info *g = &s->region;
    fprintf(f, "Region %s\n", s->path);
    fprintf(f, "  Store:        an etcd cluster (no supervisor: a dead holder's lock is freed "
               "when its etcd lease ends)\n");
    if (g->epoch)
        fprintf(f,
                "  Tokens:       epoch %" PRIu64 ", floor %" PRIu64
                " (token = epoch << %d | etcd revision)\n",
                g->epoch, g->token_floor, FL_TOKEN_EPOCH_SHIFT);
    else if (g->locks_used || g->records_used)
        fprintf(f, "  Tokens:       no epoch, yet tokens were issued (the epoch key was "
                   "deleted?): no client can acquire until `fencelock etcd-epoch --bump`\n");
    else
        fprintf(f, "  Tokens:       no epoch yet (no client has opened this prefix)\n");
    fprintf(f, "  Locks:        %" PRIu32 " keys acquired so far\n", g->locks_used);
    fprintf(f, "  Records:      %" PRIu32 ", values up to %" PRIu32 " bytes\n", g->records_used,
            g->record_size);
}

static void print_region(FILE *f, const struct snapshot *s)
{
    const fl_region_info *g = &s->region;
    char buf[128], when[64];
    if (strcmp(s->backend, "etcd") == 0) {
        print_etcd_region(f, s);
        return;
    }
    fprintf(f, "Region %s\n", s->path);
    format_size(g->file_size, buf, sizeof buf);
    fprintf(f, "  Format:       version %" PRIu32 ", %s\n", g->format_version, buf);

    format_local_time(g->created_unix_ns, when, sizeof when);
    uint64_t now = fl__wall_clock_ns();
    if (now >= g->created_unix_ns) {
        cli_format_duration(now - g->created_unix_ns, CLI_DURATION_BRIEF, buf, sizeof buf);
        fprintf(f, "  Created:      %s (%s ago)\n", when, buf);
    } else {
        fprintf(f, "  Created:      %s\n", when); /* the wall clock was set back */
    }

    fprintf(f, "  Boot:         %s (%s)\n", g->boot_id[0] ? g->boot_id : "unknown",
            g->same_boot ? "this boot"
                         : "an earlier boot: its leases are void until fencelockd adopts it");
    if (s->supervisor_alive)
        fprintf(f, "  Supervisor:   pid %" PRIu32 ", running\n", g->supervisor_pid);
    else if (g->run_state == FL_RUN_NEVER)
        fprintf(f, "  Supervisor:   none has served this region\n");
    else
        fprintf(f,
                "  Supervisor:   not running (a dead holder's lock is freed only when its "
                "lease ends)\n");
    if (g->started_unix_ns) {
        format_local_time(g->started_unix_ns, when, sizeof when);
        fprintf(f, "  Last start:   %s\n", when);
    }
    if (g->clean_unix_ns) {
        format_local_time(g->clean_unix_ns, when, sizeof when);
        fprintf(f, "  Clean stop:   %s%s\n", when,
                g->run_state == FL_RUN_CLEAN ? ""
                                             : " (the run since then has not stopped cleanly)");
    } else if (g->run_state != FL_RUN_NEVER) {
        fprintf(f, "  Clean stop:   never\n");
    }
    fprintf(f, "  Ready:        %s\n",
            g->ready ? "yes (this boot's token epoch is durable: clients may open it)"
                     : "no: fl_open refuses clients until a fencelockd makes this boot's epoch "
                       "durable (starting, failed to start, or an earlier boot's region)");
    fprintf(f,
            "  Tokens:       epoch %" PRIu64 ", floor %" PRIu64
            " (token = epoch << %d | counter)\n",
            g->epoch, g->token_floor, FL_TOKEN_EPOCH_SHIFT);
    fprintf(f, "  Locks:        %" PRIu32 " of %" PRIu32 " keys in use\n", g->locks_used,
            g->lock_capacity);
    fprintf(f, "  Records:      %" PRIu32 " of %" PRIu32 " in use, values up to %" PRIu32
               " bytes\n",
            g->records_used, g->record_capacity, g->record_size);
    if (g->records_unvouched)
        fprintf(f,
                "  Unvouched:    %" PRIu32 " records whose value fencelockd could not vouch "
                "for at its start (read as EBADMSG until committed again; its log names them, "
                "-o records:+UNVOUCHED marks them)\n",
                g->records_unvouched);
    fprintf(f, "  Buffers:      %" PRIu32 " commit buffers\n", g->buffer_count);
    fprintf(f, "  Clients:      %zu of %" PRIu32 " registered\n", s->n_clients,
            g->client_capacity);
    if (g->clients_refused)
        fprintf(f,
                "  Refused:      %" PRIu64 " registrations refused by the supervisor (client "
                "table full or out of file descriptors; its log says which)\n",
                g->clients_refused);
    fprintf(f, "  Log events:   %" PRIu64 " dropped (counters stay exact)\n", g->events_dropped);
}

/* One line per reason for the slots in use that a table does not list:
 * "285 of 301 lock slots not listed: no published key (...)". */
static void print_skipped(FILE *f, const char *indent, const uint32_t *by_reason, uint32_t used,
                          bool locks)
{
    for (int i = 0; i < SKIP_REASONS; i++)
        if (by_reason[i])
            fprintf(f, "%s%" PRIu32 " of %" PRIu32 " %s not listed: %s\n", indent, by_reason[i],
                    used, locks ? "lock slots" : "record slots",
                    locks ? skip_reasons[i].lock : skip_reasons[i].record);
}

static int print_section(FILE *f, const struct status_table *t,
                         const struct column_choice *choice, const void *rows, size_t n)
{
    fprintf(f, "\n%s\n", t->title);
    if (n == 0) {
        fputs("  (none)\n", f);
        return 0;
    }
    const struct status_column *cols[STATUS_MAX_COLUMNS];
    for (size_t c = 0; c < choice->n; c++)
        cols[c] = &t->cols[choice->ids[c]];
    return print_columns(f, cols, choice->n, rows, t->row_size, n, true);
}

int print_text(FILE *f, const struct snapshot *s, const struct column_choice choice[N_TABLES])
{
    print_region(f, s);
    int err = print_section(f, &status_tables[TABLE_CLIENTS], &choice[TABLE_CLIENTS], s->clients,
                            s->n_clients);
    if (!err)
        unreg_print_text(f, &s->unreg);
    if (!err)
        err = print_section(f, &status_tables[TABLE_LOCKS], &choice[TABLE_LOCKS], s->locks,
                            s->n_locks);
    if (!err) {
        print_skipped(f, "  ", s->skipped.locks, s->region.locks_used, true);
        err = print_section(f, &status_tables[TABLE_RECORDS], &choice[TABLE_RECORDS], s->records,
                            s->n_records);
    }
    if (!err)
        print_skipped(f, "  ", s->skipped.records, s->region.records_used, false);
    return err;
}
