/* SPDX-License-Identifier: MIT */
/*
 * status_key.c - `fencelock status KEY`: one key and the records it fences,
 * every field, as a block of lines for people or one JSON document.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "json.h"
#include "status.h"

#define FIELD "%-18s"

static void print_key_detail(FILE *f, const struct snapshot *s, const fl_lock_info *l)
{
    char buf[CELL_MAX];
    fl__keytext(l->key, buf, sizeof buf);
    fprintf(f, "Key %s\n", buf);
    fprintf(f, "  " FIELD "%s\n", "Region:", s->path);
    fprintf(f, "  " FIELD "%s\n", "State:", lock_state_name(l->state));
    if (l->token)
        fprintf(f, "  " FIELD "%" PRIu64 " (epoch %" PRIu64 ", counter %" PRIu64 ")\n",
                "Token:", l->token, (uint64_t)FL_TOKEN_EPOCH(l->token),
                (uint64_t)FL_TOKEN_COUNTER(l->token));
    else
        fprintf(f, "  " FIELD "0 (never acquired)\n", "Token:");
    if (l->token == 0)
        fprintf(f, "  " FIELD "-\n", "Holder:");
    else if (l->state == FL_LOCK_FREE)
        fprintf(f, "  " FIELD "- (the last holder was pid %" PRIu32 ")\n", "Holder:",
                l->holder_pid);
    else if (l->holder_client)
        fprintf(f, "  " FIELD "pid %" PRIu32 ", client %" PRIu32 " (client id %" PRIu64 ")\n",
                "Holder:", l->holder_pid, l->holder_client, l->holder_client_id);
    else
        fprintf(f,
                "  " FIELD "pid %" PRIu32 ", not registered (its death is noticed only when "
                "its lease ends)\n",
                "Holder:", l->holder_pid);
    lock_left_text(l, buf, sizeof buf);
    fprintf(f, "  " FIELD "%s\n", "Lease left:", buf);
    fprintf(f, "  " FIELD "%" PRIu32 "\n", "Waiters:", l->waiters);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Acquisitions:", l->acquisitions);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Contended:", l->contended);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Takeovers:", l->expiries_taken);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Deaths:", l->deaths);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Renewals:", l->renewals);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Renewals refused:", l->renew_failed);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Releases:", l->releases);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Releases refused:", l->release_failed);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Busy tries:", l->busy);
    fprintf(f, "  " FIELD "%" PRIu64 "\n", "Timed out:", l->timeouts);
    const char *op = fl__op_name(l->last_stale_op);
    if (op)
        fprintf(f, "  " FIELD "%s of token %" PRIu64 " by pid %" PRIu32 "\n", "Last stale:", op,
                l->last_stale_token, l->last_stale_pid);
    else
        fprintf(f, "  " FIELD "none\n", "Last stale:");
    const char *last = last_release_name(l);
    fprintf(f, "  " FIELD "%s\n", "Last release:", last ? last : "-");

    fl__keytext(l->key, buf, sizeof buf);
    fprintf(f, "\nRecords fenced by %s\n", buf);
    if (s->n_records == 0)
        fputs("  (none)\n", f);
    for (size_t i = 0; i < s->n_records; i++) {
        const fl_record_info *c = &s->records[i];
        fl__keytext(c->name, buf, sizeof buf);
        fprintf(f, "%s  Record %s\n", i ? "\n" : "", buf);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Accepted token:", c->accepted_token);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Version:", c->version);
        fprintf(f, "    " FIELD "%" PRIu32 " bytes\n", "Size:", c->size);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Commits:", c->commits);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Rejections:", c->rejections);
        fprintf(f, "    " FIELD "%" PRIu64 "\n", "Repeats:", c->repeats);
        op = fl__op_name(c->last_rejected_op);
        if (c->rejections && op)
            fprintf(f,
                    "    " FIELD "%s of token %" PRIu64 " by pid %" PRIu32
                    " (the record had accepted %" PRIu64 ")\n",
                    "Last rejection:", op, c->last_rejected_token, c->last_rejected_pid,
                    c->last_rejected_accepted);
        else
            fprintf(f, "    " FIELD "none\n", "Last rejection:");
    }
}

static void print_key_json(FILE *f, const struct snapshot *s, const fl_lock_info *l)
{
    fputs("{\n  \"time\": ", f);
    fl__json_now(f);
    fputs(",\n  \"region\": ", f);
    json_region(f, s);
    fputs(",\n  \"lock\": ", f);
    json_row(f, &status_tables[TABLE_LOCKS], l);
    fputs(",\n", f);
    status_json_array(f, &status_tables[TABLE_RECORDS], s->records, s->n_records, true);
    fputs("}\n", f);
}

/* status KEY: that key and its records, or exit status 4. */
int show_key(const char *key, bool json, struct snapshot *s)
{
    const fl_lock_info *l = find_lock(s, key);
    if (!l) {
        char shown[ESCAPED_MAX];
        fl__keytext(key, shown, sizeof shown);
        fprintf(stderr, "fencelock status: no key '%s' in region %s\n", shown, s->path);
        return CLI_EXIT_NO_KEY;
    }
    keep_records_of(s, key);
    if (json)
        print_key_json(stdout, s, l);
    else
        print_key_detail(stdout, s, l);
    return cli_finish_stdout();
}
