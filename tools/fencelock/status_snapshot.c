/* SPDX-License-Identifier: MIT */
/*
 * status_snapshot.c - reading a region for `fencelock status` into a struct
 * snapshot.
 *
 * The region is opened with fl_open_readonly(): mapped PROT_READ from an
 * O_RDONLY descriptor and never registered, so looking cannot disturb the
 * processes being looked at, and a read-only file can be inspected.  The
 * view is taken first and printed afterwards, so both output forms show the
 * same numbers and column widths can be fitted to them.  Every read of the
 * mapping happens inside guarded_open() or guarded_read() (guard.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "guard.h"
#include "status.h"

const struct skip_reason_text skip_reasons[SKIP_REASONS] = {
    [SKIP_NO_KEY] = {"no_published_key", "no published key", "no published name",
                     "no published key (abandoned by a creator that lost a race, or corrupt)",
                     "no published name (abandoned by a creator that lost a race, or "
                     "corrupt)"},
    [SKIP_CORRUPT] = {"corrupt", "corrupt", "corrupt", "corrupt shared data",
                      "corrupt shared data"},
};

/* The reason for err from an info call, or -1 if err is not a skip. */
static int skip_reason_of(int err)
{
    switch (err) {
    case -ENOENT: return SKIP_NO_KEY;
    case -EPROTO: return SKIP_CORRUPT;
    default: return -1;
    }
}

uint32_t skipped_total(const uint32_t *by_reason)
{
    uint32_t n = 0;
    for (int i = 0; i < SKIP_REASONS; i++)
        n += by_reason[i];
    return n;
}

void free_snapshot(struct snapshot *s)
{
    free(s->clients);
    free(s->locks);
    free(s->lock_slots);
    free(s->records);
    free(s->record_slots);
    s->clients = NULL;
    s->locks = NULL;
    s->lock_slots = NULL;
    s->records = NULL;
    s->record_slots = NULL;
    s->n_clients = s->n_locks = s->n_records = 0;
    memset(&s->skipped, 0, sizeof s->skipped);
}

int out_of_memory(const char *what)
{
    fprintf(stderr, "fencelock: %s: out of memory\n", what);
    return CLI_EXIT_RUNTIME;
}

static int fail_runtime(const char *what, int err)
{
    fprintf(stderr, "fencelock: %s: %s\n", what, fl__library_error(err));
    return CLI_EXIT_RUNTIME;
}

static int read_clients(fl_region *r, struct snapshot *s)
{
    uint32_t cap = s->region.client_capacity;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->clients = cap ? calloc(cap, sizeof *s->clients) : NULL;
    if (cap && !s->clients)
        return out_of_memory("reading the client table");
    for (uint32_t i = 1; i <= cap; i++) {
        int err = fl_client_info_get(r, i, &s->clients[s->n_clients]);
        if (err == 0)
            s->n_clients++;
        else if (err == -ERANGE)
            break;
        else if (err != -ENOENT)
            return fail_runtime("reading the client table", err);
    }
    return CLI_EXIT_OK;
}

static int read_locks(fl_region *r, struct snapshot *s)
{
    uint32_t used = s->region.locks_used;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->locks = used ? calloc(used, sizeof *s->locks) : NULL;
    s->lock_slots = used ? calloc(used, sizeof *s->lock_slots) : NULL;
    if (used && (!s->locks || !s->lock_slots))
        return out_of_memory("reading the lock table");
    for (uint32_t i = 0; i < used; i++) {
        int err = fl_lock_info_get(r, i, &s->locks[s->n_locks]);
        int why = skip_reason_of(err); /* a slot abandoned in a creation race holds no key */
        if (err == 0)
            s->lock_slots[s->n_locks++] = i;
        else if (why >= 0)
            s->skipped.locks[why]++;
        else
            return fail_runtime("reading the lock table", err);
    }
    return CLI_EXIT_OK;
}

static int read_records(fl_region *r, struct snapshot *s)
{
    uint32_t used = s->region.records_used;
    /* calloc(0, ...) may return NULL: only ask for something. */
    s->records = used ? calloc(used, sizeof *s->records) : NULL;
    s->record_slots = used ? calloc(used, sizeof *s->record_slots) : NULL;
    if (used && (!s->records || !s->record_slots))
        return out_of_memory("reading the record table");
    for (uint32_t i = 0; i < used; i++) {
        int err = fl_record_info_get(r, i, &s->records[s->n_records]);
        int why = skip_reason_of(err);
        if (err == 0)
            s->record_slots[s->n_records++] = i;
        else if (why >= 0)
            s->skipped.records[why]++;
        else
            return fail_runtime("reading the record table", err);
    }
    return CLI_EXIT_OK;
}

/* Open the region at path read-only: CLI_EXIT_OK or the exit status, the
 * problem said on stderr. */
static int open_region(const char *path, fl_region **r)
{
    int err = fl_open_readonly(path, r);
    if (err) {
        fprintf(stderr, "fencelock: %s\n", fl__library_error(err));
        return cli_open_status(err);
    }
    return CLI_EXIT_OK;
}

/* Copy out everything shown from an open region (s is empty or freed). */
static int read_snapshot(fl_region *r, const char *path, struct snapshot *s)
{
    snprintf(s->path, sizeof s->path, "%s", path);
    snprintf(s->backend, sizeof s->backend, "%s", fl_region_backend(r));
    int rc = CLI_EXIT_OK;
    int err = fl_region_info_get(r, &s->region);
    if (err)
        rc = fail_runtime("reading the region header", err);
    if (rc == CLI_EXIT_OK)
        rc = read_clients(r, s);
    if (rc == CLI_EXIT_OK)
        rc = read_locks(r, s);
    if (rc == CLI_EXIT_OK)
        rc = read_records(r, s);
    if (rc == CLI_EXIT_OK)
        unreg_read(r, &s->unreg);
    /* The library asks the supervisor's flock, which a reused pid cannot fake. */
    s->supervisor_alive = s->region.served != 0;
    return rc;
}

/* open_region() and read_snapshot() with the region's pages guarded
 * (guard.h): a SIGBUS from a file truncated under us sets *truncated and
 * returns CLI_EXIT_REGION, the message left to the caller (a terminal may
 * have to leave the alternate screen first).  After a truncation in
 * guarded_read, the handle may only be closed (fl_close touches no page of
 * the mapping); after one in guarded_open there is no handle. */
int guarded_open(const char *path, fl_region **r, bool *truncated)
{
    if (sigsetjmp(cli_bus_env, 1) != 0) {
        *truncated = true;
        return CLI_EXIT_REGION;
    }
    cli_bus_arm();
    int rc = open_region(path, r);
    cli_bus_disarm();
    return rc;
}

int guarded_read(fl_region *r, const char *path, struct snapshot *s, bool *truncated)
{
    if (sigsetjmp(cli_bus_env, 1) != 0) {
        *truncated = true;
        return CLI_EXIT_REGION;
    }
    cli_bus_arm();
    int rc = read_snapshot(r, path, s);
    cli_bus_disarm();
    return rc;
}

/* Open the region at path read-only and copy out everything shown. */
int take_snapshot(const char *path, struct snapshot *s)
{
    fl_region *r;
    bool truncated = false;
    int rc = guarded_open(path, &r, &truncated);
    if (rc == CLI_EXIT_OK) {
        rc = guarded_read(r, path, s, &truncated);
        fl_close(r);
    }
    if (truncated)
        return cli_region_truncated(path);
    return rc;
}

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Keep the keys that start with prefix and the records whose name or bound
 * key does (NULL keeps everything). */
void filter_prefix(struct snapshot *s, const char *prefix)
{
    if (!prefix)
        return;
    size_t n = 0;
    for (size_t i = 0; i < s->n_locks; i++)
        if (has_prefix(s->locks[i].key, prefix)) {
            s->locks[n] = s->locks[i];
            s->lock_slots[n++] = s->lock_slots[i];
        }
    s->n_locks = n;
    n = 0;
    for (size_t i = 0; i < s->n_records; i++)
        if (has_prefix(s->records[i].name, prefix) ||
            (s->records[i].bound_key[0] && has_prefix(s->records[i].bound_key, prefix))) {
            s->records[n] = s->records[i];
            s->record_slots[n++] = s->record_slots[i];
        }
    s->n_records = n;
}

/* The lock whose key is key, or NULL. */
const fl_lock_info *find_lock(const struct snapshot *s, const char *key)
{
    for (size_t i = 0; i < s->n_locks; i++)
        if (strcmp(s->locks[i].key, key) == 0)
            return &s->locks[i];
    return NULL;
}

/* Keep only the records fenced by key. */
void keep_records_of(struct snapshot *s, const char *key)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n_records; i++)
        if (strcmp(s->records[i].bound_key, key) == 0) {
            s->records[n] = s->records[i];
            s->record_slots[n++] = s->record_slots[i];
        }
    s->n_records = n;
}
